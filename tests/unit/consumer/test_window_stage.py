"""The window stage: counting repartition records once, replays skipped, samples built only at close."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.event import ErrorEvent
from analysis.intake.decode import DecodeConfig
from analysis.intake.redact import RedactionConfig, Redactor
from consumer.key_stage import DeadLetters, KeyStage
from consumer.keying import KeyReader, forwarded_values, group_sightings, repartition_record
from consumer.metrics import Metrics
from consumer.offsets import OffsetTracker
from consumer.settings import KafkaSettings, WindowSettings
from consumer.watermark import watermark_record
from consumer.window import BuildSamples, ClosedBurst, RawSample, Sighting
from consumer.window_stage import WindowStage, sample_builder
from consumer.workers import ServiceStats

_REDACTOR = Redactor(RedactionConfig())
_READER = KeyReader(DecodeConfig(), _REDACTOR)
_REPARTITION = ("bursts", 0)
_AWS = "AKIAIOSFODNN7EXAMPLE"


@dataclass
class _Record:
    """What aiokafka hands the stage: a repartition record."""

    offset: int
    value: bytes
    headers: Sequence[tuple[str, bytes]]
    key: bytes = b""
    timestamp: int = 0


@dataclass
class _Rig:
    stage: WindowStage
    stats: ServiceStats
    closed: list[ClosedBurst] = field(default_factory=list)
    offset: int = 0
    clock: list[float] = field(default_factory=lambda: [0.0])
    """The window's clock (monotonic) and the wall clock (epoch seconds), moved together by `tick`."""
    wall: list[float] = field(default_factory=lambda: [10_000.0])

    def forward(self, raw: bytes, source: tuple[str, int], source_offset: int, source_time: float = 1.0) -> None:
        """Send `raw` through the key stage's forwarding and into the window stage, as one replica would."""
        groups = group_sightings(_READER.read_sightings(raw, received_at=1.0))
        for index, (group, value) in enumerate(zip(groups, forwarded_values(raw, groups), strict=True)):
            headers = repartition_record(group, index, source, source_offset, value is not raw, source_time)
            self.stage.ingest(_REPARTITION, _Record(self.offset, value, headers))
            self.offset += 1

    def mark(self, marks: dict[int, float], ends: dict[int, float] | None = None) -> None:
        """A key stage's watermark record for the input partitions it owns: still being read, or seen at
        their end at the `ends` given (epoch seconds)."""
        ends = ends or {}
        listed = {partition: (at, ends.get(partition)) for partition, at in marks.items()}
        self.stage.ingest(_REPARTITION, _Record(self.offset, b"", watermark_record("errors", listed, set(ends))))
        self.offset += 1

    def expire(self, partitions: set[int], read_through: bool = False) -> list[ClosedBurst]:
        """Expire at the rig's clocks; `read_through`: the window's own partition is read to its end."""
        self.stage.expire(self.clock[0], lambda tp: read_through, partitions)
        return self.closed

    def tick(self, seconds: float) -> None:
        self.clock[0] += seconds
        self.wall[0] += seconds


def _rig(build: BuildSamples | None = None, dead_letters: DeadLetters | None = None, tenant: str = "") -> _Rig:
    closed: list[ClosedBurst] = []
    stats = ServiceStats()
    offsets = OffsetTracker()
    dead_letters = dead_letters or DeadLetters(KafkaSettings(), offsets, Metrics(), stats, _REDACTOR.redact)
    window = WindowSettings(quiet_s=10.0, max_length_s=100.0, max_samples=4)
    clock, wall = [0.0], [10_000.0]
    stage = WindowStage(window, build or sample_builder(_READER.config, _REDACTOR), closed.append, offsets,
                        dead_letters, stats, "errors", clock=lambda: clock[0], wall=lambda: wall[0], tenant=tenant)
    return _Rig(stage, stats, closed, clock=clock, wall=wall)


class _Topics:
    """Stands in for the producer the DLQ copies go through: what was published, per topic."""

    def __init__(self) -> None:
        self.published: list[tuple[str, bytes, dict[str, bytes]]] = []

    async def publish(self, topic: str, key: bytes | None, value: bytes, headers: Sequence[tuple[str, bytes]] = ()
                      ) -> None:
        self.published.append((topic, value, dict(headers)))


def _key_stage() -> KeyStage:
    """The key stage of a replica whose input is keyed by server (it forwards nothing, so it has no sink)."""
    stats, offsets = ServiceStats(), OffsetTracker()
    dead_letters = DeadLetters(KafkaSettings(), offsets, Metrics(), stats, _REDACTOR.redact)
    return KeyStage("bursts", _READER, None, offsets, dead_letters, Metrics(), stats,  # type: ignore[arg-type]
                    forward=False, mark_every_s=1.0, max_forward_bytes=1 << 20)


def _event(ts: float, message: str = "boom", server: str = "checkout", tenant: str | None = None) -> bytes:
    return orjson.dumps({"server_id": server, "timestamp": ts, "message": message, "exception": {
        "type": "KeyError", "value": message,
        "stacktrace": [{"filename": "app/shop.py", "function": "total", "lineno": 3, "in_app": True}]},
        **({"tenant": tenant} if tenant is not None else {})})


def _otlp_batch(ts: float, records: list[tuple[str, str, int]]) -> bytes:
    """An OTLP export of one record per (service, exception type, message number), all at `ts`."""
    return orjson.dumps({"resourceLogs": [
        {"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
         "scopeLogs": [{"logRecords": [{"timeUnixNano": str(int(ts * 1e9)), "body": {"stringValue": f"failed {n}"},
                                        "attributes": [{"key": "exception.type", "value": {"stringValue": exc}}]}]}]}
        for service, exc, n in records]})


class TestCountingOnce:
    def test_a_replayed_forward_is_skipped_and_a_new_one_counted(self) -> None:
        """A key-stage owner died after forwarding: its successor forwards offsets 5-6 again. Each event
        is counted once; the next new offset counts."""
        rig = _rig()
        for offset in range(7):
            rig.forward(_event(100.0 + offset), ("errors", 0), offset)
        for offset in (5, 6):
            rig.forward(_event(100.0 + offset), ("errors", 0), offset)
        rig.forward(_event(107.0), ("errors", 0), 7)
        (closed,) = rig.stage.window.flush()
        assert closed.cluster.count == 8
        assert rig.stats.replays_skipped == 2

    def test_a_deployment_of_one_tenant_counts_no_record_forwarded_for_another(self) -> None:
        """Two deployments sharing a group share the repartition topic: what another's key stage forwards
        (another tenant's events, or `default` from one not pinned yet) goes to the DLQ, not into a burst
        this deployment would analyse with its tenant's memory."""
        topics = _Topics()

        async def scenario() -> _Rig:
            stats = ServiceStats()
            dead_letters = DeadLetters(KafkaSettings(), OffsetTracker(), Metrics(), stats, _REDACTOR.redact)
            dead_letters.start(topics)  # type: ignore[arg-type]  # records what the producer would send
            rig = _rig(dead_letters=dead_letters, tenant="acme")
            rig.stats = stats
            for offset, tenant in enumerate(("acme", "globex", None, "acme")):
                rig.forward(_event(100.0 + offset, tenant=tenant), ("errors", 0), offset)
            await dead_letters.settle()
            return rig

        rig = asyncio.run(scenario())
        (closed,) = rig.stage.window.flush()
        assert (closed.cluster.tenant, closed.cluster.count) == ("acme", 2)
        assert [headers["reason"] for _, _, headers in topics.published] == [b"tenant_mismatch"] * 2
        assert [orjson.loads(value).get("tenant") for _, value, _ in topics.published] == ["globex", None]

    def test_positions_are_compared_per_source_partition(self) -> None:
        """Offset 3 of partition 1 is not a replay of offset 9 of partition 0."""
        rig = _rig()
        rig.forward(_event(1.0), ("errors", 0), 9)
        rig.forward(_event(2.0), ("errors", 1), 3)
        (closed,) = rig.stage.window.flush()
        assert closed.cluster.count == 2

    def test_the_groups_of_one_batch_are_not_replays_of_each_other(self) -> None:
        """An OTLP batch split in groups shares one source offset; the group index tells them apart."""
        rig = _rig()
        batch = orjson.dumps({"resourceLogs": [
            {"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": name}}]},
             "scopeLogs": [{"logRecords": [{"timeUnixNano": "1000000000", "severityText": "ERROR",
                                            "body": {"stringValue": f"{name} failed"}}]}]}
            for name in ("cart", "pay", "ship")]})
        rig.forward(batch, ("errors", 0), 4)
        closed = rig.stage.window.flush()
        assert sorted(c.cluster.server_id for c in closed) == ["cart", "pay", "ship"]
        assert [c.cluster.samples[0].server_id for c in sorted(closed, key=lambda c: c.cluster.server_id)] == [
            "cart", "pay", "ship"]

    def test_forget_replays_after_the_broker_lost_its_topics(self) -> None:
        """Recreated topics start their offsets over: after `forget_replays`, offset 0 counts again."""
        rig = _rig()
        rig.forward(_event(1.0), ("errors", 0), 50)
        rig.stage.forget_replays()
        rig.forward(_event(2.0), ("errors", 0), 0)
        (closed,) = rig.stage.window.flush()
        assert closed.cluster.count == 2


class TestSamplesBuiltAtClose:
    def test_only_the_kept_samples_are_decoded_once_when_the_burst_closes(self) -> None:
        """1,000 events, 4 samples: the builder runs once, at close, on the first two and the last two."""
        calls: list[list[RawSample]] = []
        real = sample_builder(_READER.config, _REDACTOR)

        def spy(raw: Sequence[RawSample], first: Sighting) -> tuple[ErrorEvent, ...]:
            calls.append(list(raw))
            return real(raw, first)

        rig = _rig(build=spy)
        for offset in range(1000):
            rig.forward(_event(offset / 100, message=f"m{offset}"), ("errors", 0), offset)
        assert calls == []
        (closed,) = rig.stage.window.flush()
        assert len(calls) == 1 and len(calls[0]) == 4
        assert [s.message for s in closed.cluster.samples] == ["m0", "m1", "m998", "m999"]

    def test_samples_and_the_message_tally_are_redacted(self) -> None:
        """The bytes are held as received; what the closed burst carries is redacted."""
        rig = _rig()
        for offset in range(3):
            rig.forward(_event(1.0 + offset, message=f"denied for {_AWS}"), ("errors", 0), offset)
        (closed,) = rig.stage.window.flush()
        cluster = closed.cluster
        assert _AWS not in repr(cluster.samples) and _AWS not in repr(cluster.messages)
        assert cluster.messages[0].count == 3

    def test_a_sample_that_no_longer_decodes_leaves_a_redacted_stand_in(self) -> None:
        """The builder never fails a burst: with no decodable sample, the first sighting stands in."""
        build = sample_builder(_READER.config, _REDACTOR)
        (sighting,) = _READER.read_sightings(_event(5.0, message=f"key {_AWS}"), received_at=1.0)
        (stand_in,) = build([(b"not json", 0, 5.0)], sighting)
        assert (stand_in.server_id, stand_in.timestamp) == ("checkout", 5.0)
        assert _AWS not in stand_in.message


class TestKeyedInput:
    def test_each_burst_of_a_keyed_batch_holds_and_decodes_only_its_own_records(self) -> None:
        """An OTLP batch of 40 servers read by the window itself (input keyed by server): each burst keeps
        the slice of the batch with its own two records, so closing all 40 decodes about the batch's bytes
        once, not the whole batch 40 times (attacker review: 3,000 servers in 1 MB blocked the loop for
        minutes)."""
        servers = [f"svc-{n}" for n in range(40)]
        raw = orjson.dumps({"resourceLogs": [
            {"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": server}}]},
             "scopeLogs": [{"logRecords": [
                 {"timeUnixNano": str((1_700_000_000 + i) * 10**9), "severityText": "ERROR",
                  "body": {"stringValue": f"{server} failed {i}"},
                  "attributes": [{"key": "exception.type", "value": {"stringValue": "Timeout"}}]}
                 for i in range(2)]}]}
            for server in servers]})
        decoded: list[int] = []  # the bytes each close decodes (each message of its samples once)
        real = sample_builder(_READER.config, _REDACTOR)

        def spy(samples: Sequence[RawSample], first: Sighting) -> tuple[ErrorEvent, ...]:
            decoded.append(sum(len(value) for value in {id(value): value for value, _, _ in samples}.values()))
            return real(samples, first)

        rig = _rig(build=spy)
        keyed = _key_stage().key(("errors", 0), _Record(3, raw, ()))
        assert keyed is not None
        rig.stage.count_keyed(keyed, (("errors", 0), 3))
        closed = rig.stage.window.flush()
        assert sorted(c.cluster.server_id for c in closed) == sorted(servers)
        for burst in closed:
            server = burst.cluster.server_id
            assert burst.cluster.count == 2
            assert [s.message for s in burst.cluster.samples] == [f"{server} failed 0", f"{server} failed 1"]
        assert sum(decoded) < 2 * len(raw)

    @settings(max_examples=40, deadline=None)
    @given(st.lists(st.lists(st.tuples(st.sampled_from(["cart", "pay"]), st.sampled_from(["A", "B"]),
                                       st.integers(0, 3)), min_size=1, max_size=4), min_size=1, max_size=6))
    def test_keyed_input_counts_what_the_repartition_topic_counts(
            self, messages: list[list[tuple[str, str, int]]]) -> None:
        """Messages of one record (the key stage's quick path) and OTLP batches of several keys, read by the
        window itself: the same bursts, counts, messages and samples as when forwarded through the
        repartition topic."""
        forwarded, keyed, key_stage = _rig(), _rig(), _key_stage()
        for offset, records in enumerate(messages):
            raw = _otlp_batch(100.0 + offset, records)
            forwarded.forward(raw, ("errors", 0), offset)
            read = key_stage.key(("errors", 0), _Record(offset, raw, ()))
            assert read is not None
            keyed.stage.count_keyed(read, (("errors", 0), offset))

        def bursts(rig: _Rig) -> list[tuple[str, str, int, object, list[str]]]:
            return sorted((c.cluster.server_id, c.cluster.fingerprint, c.cluster.count, c.cluster.messages,
                           [e.message for e in c.cluster.samples]) for c in rig.stage.window.flush())

        counted = bursts(keyed)
        assert counted == bursts(forwarded)
        assert sum(burst[2] for burst in counted) == sum(map(len, messages))
        assert keyed.stats.records_in == len(messages)

    def test_accepted_messages_are_counted_by_the_turns_check(self) -> None:
        """`events_total{outcome="accepted"}` is updated once per turn (at `check`), for every message keyed."""
        metrics = Metrics()
        stats, offsets = ServiceStats(), OffsetTracker()
        dead_letters = DeadLetters(KafkaSettings(), offsets, metrics, stats, _REDACTOR.redact)
        stage = KeyStage("bursts", _READER, None, offsets, dead_letters, metrics, stats,  # type: ignore[arg-type]
                         forward=False, mark_every_s=1.0, max_forward_bytes=1 << 20)
        for offset in range(3):
            assert stage.key(("errors", 0), _Record(offset, _event(100.0 + offset), ())) is not None
        stage.check()
        assert metrics.events.labels("accepted")._value.get() == 3


class TestWatermarks:
    def test_a_burst_closes_once_every_input_partition_has_moved_past_its_quiet_time(self) -> None:
        """Marks of one input partition are not enough: another's events may still be on their way."""
        rig = _rig()
        for offset in range(3):
            rig.forward(_event(100.0 + offset), ("errors", 0), offset, source_time=200.0 + offset)
        rig.mark({0: 500.0})
        assert rig.expire({0, 1}) == []
        rig.mark({1: 205.0})
        assert rig.expire({0, 1}) == []  # partition 1 is 3 s past the burst's last arrival, not 10
        rig.mark({1: 212.5})
        (closed,) = rig.expire({0, 1})
        assert (closed.reason, closed.cluster.count) == ("quiet", 3)

    def test_marks_of_another_topic_are_not_counted(self) -> None:
        """A mark of a topic that is not the input (the setting changed) says nothing about the input."""
        rig = _rig()
        rig.forward(_event(100.0), ("errors", 0), 0, source_time=200.0)
        rig.stage.ingest(_REPARTITION, _Record(rig.offset, b"", watermark_record("other", {0: (900.0, None)}, ())))
        assert rig.expire({0}) == []

    def test_a_revoked_partition_forgets_its_marks(self) -> None:
        """A partition that comes back must hear from the key stages again before it closes anything."""
        rig = _rig()
        rig.mark({0: 900.0})
        rig.stage.revoke([_REPARTITION])
        rig.forward(_event(100.0), ("errors", 0), 0, source_time=200.0)
        assert rig.expire({0}) == []


class TestMarksBehindForwards:
    def test_a_mark_sent_before_its_partition_was_read_does_not_close_what_it_forwards(self) -> None:
        """Partition 0's last mark says nothing was read from it, placed at the time its end was seen; its
        first events, stamped long before (a backlog's times), come before the mark that reports them.
        They are not past the quiet time of themselves: the burst waits for the marks to move on."""
        rig = _rig()
        rig.mark({0: 5000.0, 1: 5000.0})  # nothing read yet: at the time each end was seen
        rig.forward(_event(100.0), ("errors", 0), 0, source_time=200.0)
        assert rig.expire({0, 1}) == []
        rig.mark({0: 200.0, 1: 5000.0})
        assert rig.expire({0, 1}) == []
        rig.mark({0: 210.5, 1: 5000.0})
        assert len(rig.expire({0, 1})) == 1


class TestIdleness:
    def test_a_quiet_burst_closes_once_every_key_stage_saw_the_input_end_quiet_s_after_it(self) -> None:
        """A key stage whose forwards are late keeps saying it read its partition to its end, but last saw
        that end 5 s after the burst's last event: however long the window waits, the burst stays open
        until that stage reports an end seen 10 s (the quiet time) after it."""
        rig = _rig()
        rig.forward(_event(100.0), ("errors", 0), 0, source_time=200.0)
        arrived = rig.wall[0]
        rig.mark({0: 150.0}, ends={0: arrived + 30})
        rig.mark({1: 150.0}, ends={1: arrived + 5})
        rig.tick(60)
        assert rig.expire({0, 1}, read_through=True) == []
        rig.mark({1: 150.0}, ends={1: arrived + 10})
        (closed,) = rig.expire({0, 1}, read_through=True)
        assert (closed.reason, closed.cluster.count) == ("quiet", 1)

    def test_ends_count_once_the_window_read_its_own_partition_to_its_end(self) -> None:
        """A window behind on its own partition may not have read forwards the ends cover."""
        rig = _rig()
        rig.forward(_event(100.0), ("errors", 0), 0, source_time=200.0)
        rig.mark({0: 150.0}, ends={0: rig.wall[0] + 30})
        rig.tick(60)
        assert rig.expire({0}) == []
        assert len(rig.expire({0}, read_through=True)) == 1

    def test_an_end_stamped_ahead_of_this_clock_counts_as_now(self) -> None:
        """Another host's clock ahead (or a forged end) closes nothing before quiet_s of this clock."""
        rig = _rig()
        rig.forward(_event(100.0), ("errors", 0), 0, source_time=200.0)
        rig.mark({0: 150.0}, ends={0: rig.wall[0] + 3600})
        rig.tick(9)
        assert rig.expire({0}, read_through=True) == []
        rig.tick(1)
        assert len(rig.expire({0}, read_through=True)) == 1

    def test_a_replica_that_predates_end_times_is_read_to_its_end_as_of_now(self) -> None:
        """During a rolling upgrade an older key stage sends "read to its end" without a time: the rule
        before end times, quiet_s of this window's clock without an event."""
        rig = _rig()
        rig.forward(_event(100.0), ("errors", 0), 0, source_time=200.0)
        older = orjson.dumps({"topic": "errors", "marks": [[0, 150.0, True]]})
        rig.stage.ingest(_REPARTITION, _Record(rig.offset, b"", [("watermark", older)]))
        rig.tick(9)
        assert rig.expire({0}, read_through=True) == []
        rig.tick(1)
        assert len(rig.expire({0}, read_through=True)) == 1
