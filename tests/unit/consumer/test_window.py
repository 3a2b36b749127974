"""Burst windows: session membership in event time whatever the arrival order, closing on watermarks, the
open-burst cap and bounded samples."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.intake.decode import DecodeConfig
from analysis.intake.redact import RedactionConfig, Redactor
from consumer.keying import KeyReader
from consumer.window import BurstWindow, ClosedBurst, PartitionKey
from consumer.window_stage import sample_builder

TP0 = ("errors", 0)
TP1 = ("errors", 1)
_REDACTOR = Redactor(RedactionConfig())
_READER = KeyReader(DecodeConfig(), _REDACTOR)


class FakeClock:
    """A wall clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _event(ts: float, *, server: str = "checkout", exc: str = "java.lang.NullPointerException",
           function: str = "charge", commit: str | None = "a1", message: str = "boom") -> bytes:
    """A native-shape message, as a service logs it."""
    frames = [{"function": function, "module": "com.shop.payment.PaymentService",
               "filename": "PaymentService.java", "lineno": 42, "in_app": True}]
    return orjson.dumps({"server_id": server, "timestamp": ts, "message": message, "commit": commit,
                         "exception": {"type": exc, "value": message, "stacktrace": frames}})


def _window(clock: FakeClock, *, quiet: float = 10.0, length: float = 100.0, max_open: int = 100,
            samples: int = 4) -> BurstWindow:
    return BurstWindow(quiet_s=quiet, max_length_s=length, max_open=max_open, max_samples=samples,
                       build_samples=sample_builder(_READER.config, _REDACTOR), clock=clock)


def _add(window: BurstWindow, raw: bytes, offset: int, tp: tuple[str, int] = TP0,
         arrival: float | None = None) -> list[ClosedBurst]:
    """Count `raw` as the window stage does: its sightings, its bytes as the sample; it reached the broker
    at `arrival` (by default at its event time, as a live stream does)."""
    closed: list[ClosedBurst] = []
    for index, sighting in enumerate(_READER.read_sightings(raw, received_at=0.0)):
        at = sighting.timestamp if arrival is None else arrival
        closed += window.add(sighting, (raw, index, sighting.timestamp), (tp, offset), at)
    return closed


def _at(mark: float | None, end: float | None = None) -> Callable[[PartitionKey], tuple[float, float | None] | None]:
    """Every partition read up to `mark` in broker time, and seen at its end at `end` of the window's clock
    (None: not known)."""
    return lambda tp: None if mark is None else (mark, end)


def _spans(closed: list[ClosedBurst]) -> list[tuple[str, float, float, int]]:
    return sorted((c.cluster.server_id, c.cluster.first_seen, c.cluster.last_seen, c.cluster.count) for c in closed)


class TestBurstWindow:
    def test_events_of_one_signature_share_a_burst_until_quiet(self) -> None:
        """Events closer than quiet_s in event time join one burst; one after a longer gap opens another."""
        window = _window(FakeClock())
        for i in range(5):
            assert _add(window, _event(100.0 + i), offset=i) == []
        assert _add(window, _event(100.0 + 4 + 10.5), offset=5) == []
        assert window.open_count == 2
        (closed,) = window.expire(0.0, _at(114.5))
        assert closed.reason == "quiet"
        assert (closed.cluster.count, closed.cluster.first_seen, closed.cluster.last_seen) == (5, 100.0, 104.0)
        assert window.open_count == 1

    def test_burst_closes_at_max_length_even_without_a_gap(self) -> None:
        """A steady stream is cut into bursts of at most max_length_s of event time."""
        window = _window(FakeClock(), quiet=10.0, length=30.0)
        for i in range(0, 75, 5):
            _add(window, _event(float(i)), offset=i)
        closed = window.expire(0.0, _at(1e9))
        assert [(c.reason, c.cluster.first_seen, c.cluster.last_seen) for c in closed] == [
            ("max_length", 0.0, 30.0), ("max_length", 35.0, 65.0), ("quiet", 70.0, 70.0)]

    def test_membership_follows_event_time_so_a_replay_rebuilds_the_same_bursts(self) -> None:
        """Replaying the same events with a different wall clock yields identical bursts."""
        events = [_event(t) for t in (0.0, 1.0, 2.0, 50.0, 51.0, 200.0)]

        def run(step: float) -> list[tuple[float, float, int]]:
            clock = FakeClock()
            window = _window(clock)
            closed: list[ClosedBurst] = []
            for i, event in enumerate(events):
                clock.now += step
                closed += _add(window, event, offset=i)
            closed += window.flush()
            return [(c.cluster.first_seen, c.cluster.last_seen, c.cluster.count) for c in closed]

        assert run(step=0.001) == run(step=7.0) == [(0.0, 2.0, 3), (50.0, 51.0, 2), (200.0, 200.0, 1)]

    def test_a_burst_closes_once_its_partitions_moved_past_its_quiet_time(self) -> None:
        """With no further event, a burst closes once the watermark is quiet_s past its last arrival."""
        window = _window(FakeClock(), quiet=10.0)
        _add(window, _event(1.0, server="a"), offset=0, arrival=1.0)
        _add(window, _event(1.0, server="b"), offset=1, arrival=7.0)
        assert window.expire(0.0, _at(11.0)) == []
        assert [c.cluster.server_id for c in window.expire(0.0, _at(11.5))] == ["a"]
        assert window.expire(0.0, _at(11.5)) == []
        assert [(c.cluster.server_id, c.reason) for c in window.expire(0.0, _at(17.5))] == [("b", "quiet")]
        assert window.open_count == 0

    def test_different_servers_and_signatures_get_separate_bursts(self) -> None:
        """The key is (server, tenant, fingerprint): neither servers nor failure sites are mixed."""
        window = _window(FakeClock())
        _add(window, _event(1.0, server="a"), 0)
        _add(window, _event(1.0, server="b"), 1)
        _add(window, _event(1.0, server="a", function="refund"), 2)
        _add(window, _event(1.0, server="a", exc="java.lang.IllegalStateException"), 3)
        _add(window, _event(1.5, server="a"), 4)
        closed = window.flush()
        assert sorted(c.cluster.count for c in closed) == [1, 1, 1, 2]
        assert {c.reason for c in closed} == {"flush"}
        assert len({c.cluster.fingerprint for c in closed}) == 3

    def test_past_the_cap_the_least_recently_updated_burst_is_evicted(self) -> None:
        """Opening a burst beyond max_open closes the one updated longest ago, with reason 'evicted'."""
        clock = FakeClock()
        window = _window(clock, max_open=2)
        _add(window, _event(1.0, server="a"), 0)
        clock.now += 1
        _add(window, _event(1.0, server="b"), 1)
        clock.now += 1
        _add(window, _event(2.0, server="a"), 2)  # a is now the most recent
        closed = _add(window, _event(3.0, server="c"), 3)
        assert [(c.cluster.server_id, c.reason) for c in closed] == [("b", "evicted")]
        assert window.open_count == 2

    def test_samples_are_bounded_and_keep_first_and_latest(self) -> None:
        """A burst of 1000 events keeps max_samples events: the first ones and the newest ones, in order."""
        window = _window(FakeClock(), samples=4)
        for i in range(1000):
            _add(window, _event(float(i) / 100, message=f"m{i}"), i)
        (closed,) = window.flush()
        assert [s.message for s in closed.cluster.samples] == ["m0", "m1", "m998", "m999"]
        assert closed.cluster.representative.message == "m999"
        assert closed.cluster.count == 1000

    def test_commits_are_distinct_and_the_last_seen_is_last(self) -> None:
        """Commits are kept once each, ordered so the one seen last is the one analysed."""
        window = _window(FakeClock())
        for i, commit in enumerate(["a1", "a1", "b2", None, "a1", "c3", "b2"]):
            _add(window, _event(float(i), commit=commit), i)
        (closed,) = window.flush()
        assert closed.cluster.commits == ("a1", "c3", "b2")
        assert closed.cluster.commit == "b2"

    @settings(max_examples=200, deadline=None)
    @given(commits=st.lists(st.sampled_from([None, *(f"c{i}" for i in range(20))]), max_size=80))
    def test_commits_follow_the_distinct_last_seen_rule_past_the_cap(self, commits: list[str | None]) -> None:
        """Any commit sequence keeps the distinct commits by last sighting, the newest last, at most 16."""
        window = _window(FakeClock())
        for i, commit in enumerate(commits):
            _add(window, _event(float(i), commit=commit), i)
        expected: dict[str, None] = {}
        for commit in commits:
            if commit and commit not in expected:
                expected[commit] = None
                if len(expected) > 16:
                    del expected[next(iter(expected))]
            elif commit and next(reversed(expected)) != commit:
                del expected[commit]
                expected[commit] = None
        closed = window.flush()
        assert [burst.cluster.commits for burst in closed] == ([tuple(expected)] if commits else [])

    def test_burst_holds_its_lowest_offset_per_partition(self) -> None:
        """A closed burst reports, per partition, the first (lowest) offset it took an event from."""
        window = _window(FakeClock())
        _add(window, _event(1.0), 7, TP0)
        _add(window, _event(1.1, server="other"), 8, TP0)
        _add(window, _event(1.2), 3, TP1)
        _add(window, _event(1.3), 9, TP0)
        assert window.held_offsets() == {TP0: 7, TP1: 3}
        closed = {c.cluster.server_id: c for c in window.flush()}
        assert dict(closed["checkout"].offsets) == {TP0: 7, TP1: 3}
        assert dict(closed["other"].offsets) == {TP0: 8}
        assert closed["checkout"].token != closed["other"].token
        assert window.held_offsets() == {}

    def test_once_everything_is_read_a_burst_closes_after_quiet_s_of_wall_time(self) -> None:
        """Every input partition read to its end now: a burst closes once it got nothing for quiet_s of
        wall time, whatever its records' timestamps said."""
        clock = FakeClock()
        window = _window(clock, quiet=10.0)
        _add(window, _event(1.0, server="a"), 0, arrival=1.0)
        clock.now += 6
        _add(window, _event(1.0, server="b"), 1, arrival=9e9)
        clock.now += 5
        assert [c.cluster.server_id for c in window.expire(clock.now, _at(0.0, clock.now))] == ["a"]
        assert window.expire(clock.now, _at(0.0, clock.now)) == []
        clock.now += 5
        closed = window.expire(clock.now, _at(0.0, clock.now))
        assert [(c.cluster.server_id, c.reason) for c in closed] == [("b", "quiet")]

    def test_idleness_counts_up_to_when_the_input_was_last_seen_at_its_end(self) -> None:
        """A key stage whose forwards are late last saw the input's end 5 s after the burst's last event:
        however long ago that was, what it forwards next was read after then, so the burst stays open
        until an end seen quiet_s after its last event."""
        clock = FakeClock()
        window = _window(clock, quiet=10.0)
        _add(window, _event(1.0), 0, arrival=1.0)
        last_event = clock.now
        clock.now += 60
        assert window.expire(clock.now, _at(0.0, last_event + 5)) == []
        assert window.expire(clock.now, _at(0.0, last_event + 9.5)) == []
        assert [c.reason for c in window.expire(clock.now, _at(0.0, last_event + 10))] == ["quiet"]

    def test_a_partition_not_known_to_have_moved_holds_its_bursts(self) -> None:
        """While a partition's progress is unknown, or one of a burst's partitions lags, it stays open."""
        clock = FakeClock()
        window = _window(clock, quiet=10.0)
        _add(window, _event(1.0), 0, TP0)
        _add(window, _event(2.0), 0, TP1)
        clock.now += 60
        assert window.expire(clock.now, _at(None)) == []
        assert window.expire(clock.now, lambda tp: (100.0 if tp == TP0 else 5.0, False)) == []
        assert window.open_count == 1
        assert [c.reason for c in window.expire(clock.now, _at(100.0))] == ["quiet"]

    def test_a_burst_open_for_max_length_of_wall_time_closes_even_when_behind(self) -> None:
        """A consumer that never catches up still closes (and releases) a burst after max_length_s."""
        clock = FakeClock()
        window = _window(clock, quiet=10.0, length=100.0)
        _add(window, _event(1.0, server="a"), 0)
        clock.now += 50
        _add(window, _event(1.0, server="b"), 1)
        clock.now += 49
        _add(window, _event(2.0, server="a"), 2)  # recent activity does not extend the cap
        assert window.expire(clock.now, _at(None)) == []
        clock.now += 1
        closed = window.expire(clock.now, _at(None))
        assert [(c.cluster.server_id, c.cluster.count, c.reason) for c in closed] == [("a", 2, "max_length")]
        assert window.open_count == 1

    def test_a_closed_burst_reports_its_span_per_partition(self) -> None:
        """The first and last offset per partition travel with the closed burst (for safe commits)."""
        window = _window(FakeClock())
        for offset in (4, 6, 9):
            _add(window, _event(1.0 + offset / 10), offset, TP0)
        (closed,) = window.flush()
        assert dict(closed.spans) == {TP0: (4, 9)}

    def test_revoking_drops_bursts_read_only_from_revoked_partitions(self) -> None:
        """Their new owner replays them; keeping them would count replayed events twice."""
        window = _window(FakeClock())
        _add(window, _event(1.0), 3, TP0)
        _add(window, _event(1.1, server="other"), 5, TP1)
        assert window.revoke({TP0}) == []
        assert window.open_count == 1
        assert window.held_offsets() == {TP1: 5}

    def test_revoking_closes_a_burst_that_also_spans_a_kept_partition(self) -> None:
        """What this consumer read of a burst spread over partitions is analysed, not silently dropped."""
        window = _window(FakeClock())
        _add(window, _event(1.0), 3, TP0)
        _add(window, _event(1.1), 8, TP1)
        (closed,) = window.revoke({TP0})
        assert closed.reason == "rebalance"
        assert closed.cluster.count == 2
        assert window.open_count == 0


class TestDistinctMessages:
    def test_two_messages_on_the_same_frames_are_counted_apart(self) -> None:
        """One signature, two null dereferences: the burst stays one, its cluster tallies both messages,
        most frequent first, with an example as logged."""
        window = _window(FakeClock())
        for i in range(10):
            message = f"customer {1000 + i} is null" if i < 7 else "cart is null"
            _add(window, _event(100.0 + i, message=message), offset=i)
        (closed,) = window.flush()
        assert closed.cluster.count == 10
        tallies = [(m.message, m.count) for m in closed.cluster.messages]
        assert tallies == [("customer <*> is null", 7), ("cart is null", 3)]
        assert closed.cluster.messages[0].example == "customer 1000 is null"

    def test_an_id_in_every_message_still_counts_every_event(self) -> None:
        """Past the cap of messages counted as logged, the rest are counted by template (ids of 2 and 3
        digits make two): one masked message, every event counted."""
        window = _window(FakeClock(), length=10_000.0)
        for i in range(300):
            _add(window, _event(100.0 + i * 0.01, message=f"order {i} not found"), offset=i)
        (closed,) = window.flush()
        assert [(m.message, m.count) for m in closed.cluster.messages] == [("order <*> not found", 300)]

    def test_numbers_of_any_length_and_uuids_still_count_every_event(self) -> None:
        """Durations of 3 to 5 digits and a request UUID in every message: each UUID spelled its hex letters
        and digits in another order, so 57 of the demo's 89 timeouts went uncounted."""
        window = _window(FakeClock(), length=10_000.0)
        for i in range(300):
            message = f"Timeout after {137 * i + 100} ms (request {uuid.UUID(int=i * 7919 ** 5)})"
            _add(window, _event(100.0 + i * 0.01, message=message), offset=i)
        (closed,) = window.flush()
        assert [(m.message, m.count) for m in closed.cluster.messages] == \
            [("Timeout after <*> ms (request <*>-<*>)", 300)]


class TestByteBudget:
    """Open bursts are bounded in bytes too: large distinct events cannot pile up to the count cap."""

    def test_large_distinct_events_evict_the_oldest_past_the_budget(self) -> None:
        """Each 1 MiB message opens a burst; past max_open_bytes the least recently updated ones close early."""
        window = BurstWindow(quiet_s=10.0, max_length_s=100.0, max_open=10_000, max_samples=4,
                             build_samples=sample_builder(_READER.config, _REDACTOR), clock=FakeClock(),
                             max_open_bytes=8 << 20)
        evicted = 0
        for i in range(40):
            closed = _add(window, _event(100.0, function=f"f{i}", message=f"{i} " + "m" * 500_000), i)
            evicted += sum(c.reason == "evicted" for c in closed)
            assert window.open_bytes <= 8 << 20
        assert window.open_count <= 8 and evicted == 40 - window.open_count

    def test_a_burst_is_charged_the_raw_bytes_of_its_samples_only(self) -> None:
        """Past max_samples, a repeat replaces a tail sample: the charge stays that of the samples kept,
        whatever the count (and no decoded event is held while the burst is open)."""
        window = _window(FakeClock(), samples=4)
        charged = []
        for i in range(200):
            _add(window, _event(100.0 + i * 0.01, message="same message"), i)
            charged.append(window.open_bytes)
        one = len(_event(100.0, message="same message"))
        assert 4 * one < charged[-1] < 4 * one + 4096
        assert charged[-1] - charged[3] < 64  # samples replaced, not added

    def test_a_closed_burst_keeps_its_last_event_whole_and_only_messages_of_large_earlier_ones(self) -> None:
        """The representative keeps its frames; an earlier sample from a message over 16 kB keeps its message."""
        window = _window(FakeClock(), samples=4)
        big = "t" * 100_000
        for i in range(4):
            raw = orjson.loads(_event(100.0 + i, message=f"message {i}"))
            raw["raw_trace_padding"] = big
            _add(window, orjson.dumps(raw), i)
        (closed,) = window.flush()
        *earlier, last = closed.cluster.samples
        assert last.exceptions and last.exceptions[0].frames
        assert [s.message for s in earlier] == ["message 0", "message 1", "message 2"]
        assert all([e.frames for e in s.exceptions] == [()] and not s.extra for s in earlier)
        assert window.open_bytes == 0

    def test_the_message_tally_keeps_what_it_reads_of_each_message(self) -> None:
        """Distinct megabyte messages in one burst are tallied by their first 512 characters, and charged."""
        window = _window(FakeClock(), samples=2)
        for i in range(16):
            _add(window, _event(100.0 + i, message=f"{i:02d} " + "m" * 500_000), i)
        assert window.open_bytes < 3 * (1 << 20) + 16 * 1024  # two samples, and 16 short tally keys
        (closed,) = window.flush()
        assert sum(m.count for m in closed.cluster.messages) == 16


class TestBoundedExpiry:
    def test_expiry_past_its_deadline_closes_one_burst_and_leaves_the_rest_for_the_next_call(self) -> None:
        """Closing decodes samples: past `until` it stops after one close, and nothing is lost."""
        clock = FakeClock()
        window = _window(clock, quiet=1.0)
        for i in range(10):
            _add(window, _event(100.0, function=f"f{i}"), i)
        first = window.expire(clock.now, _at(200.0), until=0.0)  # a deadline long gone
        rest = window.expire(clock.now, _at(200.0))
        assert len(first) == 1 and len(rest) == 9 and window.open_count == 0


def _sessions(times: list[float], quiet: float) -> list[tuple[float, float, int]]:
    """The bursts a list of event times makes, worked out directly: sorted, cut where a gap passes quiet."""
    bursts: list[list[float]] = []
    for ts in sorted(times):
        if bursts and ts - bursts[-1][-1] <= quiet:
            bursts[-1].append(ts)
        else:
            bursts.append([ts])
    return [(b[0], b[-1], len(b)) for b in bursts]


class TestArrivalOrder:
    """A backlog read from unkeyed partitions (by one replica or several) delivers a burst's events far out
    of order; the bursts must come out the same as in order."""

    @settings(max_examples=300, deadline=None)
    @given(times=st.lists(st.sampled_from([float(t) for t in range(0, 200, 4)]), min_size=1, max_size=60),
           order=st.randoms(use_true_random=False))
    def test_any_arrival_order_gives_the_bursts_of_the_sorted_events(self, times: list[float], order) -> None:  # type: ignore[no-untyped-def]
        """Whatever order the events come in, each burst holds exactly the events within quiet_s of each
        other: late events join their burst, and one that bridges two merges them."""
        shuffled = list(times)
        order.shuffle(shuffled)
        window = _window(FakeClock(), quiet=10.0, length=10_000.0)
        for offset, ts in enumerate(shuffled):
            assert _add(window, _event(ts), offset) == []
        closed = window.expire(0.0, _at(1e9))
        assert sorted((c.cluster.first_seen, c.cluster.last_seen, c.cluster.count) for c in closed) == \
            _sessions(times, 10.0)
        assert window.open_count == 0 and window.open_bytes == 0

    def test_an_event_bridging_two_bursts_merges_them_whole(self) -> None:
        """The merged burst counts every event, keeps the earliest and latest samples by event time, the
        commits in time order, and every offset it holds."""
        window = _window(FakeClock(), quiet=10.0, samples=4)
        for i, ts in enumerate((30.0, 31.0, 32.0)):
            _add(window, _event(ts, commit="new", message=f"late {i}"), 10 + i, TP1)
        for i, ts in enumerate((0.0, 1.0, 2.0, 12.0)):
            _add(window, _event(ts, commit="old", message=f"early {i}"), i, TP0)
        assert window.open_count == 2
        _add(window, _event(21.0, commit="old", message="bridge"), 4, TP0)
        assert window.open_count == 1
        (closed,) = window.flush()
        cluster = closed.cluster
        assert (cluster.first_seen, cluster.last_seen, cluster.count) == (0.0, 32.0, 8)
        assert [s.message for s in cluster.samples] == ["early 0", "early 1", "late 1", "late 2"]
        assert cluster.commits == ("old", "new")
        assert dict(closed.spans) == {TP0: (0, 4), TP1: (10, 12)}
        assert sum(m.count for m in cluster.messages) == 8
        assert window.open_bytes == 0

    def test_two_sources_read_far_apart_in_time_still_make_whole_bursts(self) -> None:
        """Source partition 1 is read to its end before source 0 starts (a backlog read unkeyed), both into
        one repartition partition: its watermark is the least of the sources', so each burst stays open
        until the slower source has moved past it, and comes out whole."""
        window = _window(FakeClock(), quiet=10.0)
        bursts = [(0.0, 20.0), (100.0, 120.0), (300.0, 320.0)]
        events = [start + i for start, end in bursts for i in range(int(end - start))]
        sources: dict[int, float | None] = {0: None, 1: None}

        def watermark(tp: PartitionKey) -> tuple[float, bool] | None:
            marks = list(sources.values())
            return None if None in marks else (min(m for m in marks if m is not None), False)

        closed: list[ClosedBurst] = []
        offset = 0
        for source, times in ((1, events[1::2]), (0, events[0::2])):
            for ts in times:
                closed += _add(window, _event(ts), offset, TP0)
                offset += 1
                sources[source] = ts
                closed += window.expire(0.0, watermark)
        closed += window.flush()
        assert [(c.cluster.first_seen, c.cluster.last_seen, c.cluster.count) for c in closed] == \
            [(0.0, 19.0, 20), (100.0, 119.0, 20), (300.0, 319.0, 20)]
        assert [c.reason for c in closed] == ["quiet", "quiet", "flush"]


class TestScatteredEvents:
    def test_one_key_keeps_at_most_32_bursts_open(self) -> None:
        """Events far apart in event time each open a burst; past 32 for one key, the least recently
        updated of that key closes, so an event never compares with more than 32 bursts."""
        clock = FakeClock()
        window = _window(clock, quiet=10.0, length=100.0)
        evicted: list[ClosedBurst] = []
        for i in range(40):
            clock.now += 1
            evicted += _add(window, _event(1000.0 * i), i)
        assert window.open_count == 32
        assert [(c.reason, c.cluster.first_seen) for c in evicted] == [("evicted", 1000.0 * i) for i in range(8)]

    def test_the_representative_is_the_newest_event_whatever_order_they_came_in(self) -> None:
        """A late event (older than the burst's newest) must not become the event analysed, since the
        commit analysed is the newest one's."""
        window = _window(FakeClock(), samples=2)
        for offset, (ts, commit) in enumerate([(200.0, "new"), (210.0, "new"), (190.0, "old")]):
            _add(window, _event(ts, commit=commit, message=f"at {ts:.0f}"), offset)
        (closed,) = window.flush()
        assert closed.cluster.representative.message == "at 210"
        assert closed.cluster.commit == "new"
        assert [s.timestamp for s in closed.cluster.samples] == sorted(s.timestamp for s in closed.cluster.samples)
