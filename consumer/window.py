"""Burst windows: count the events of one server and signature into bursts, pure and clock-injected.

The window counts first and builds later. Each event arrives as a `Sighting` (what the burst key and the
counts need: server, tenant, fingerprint, type, event time, commit, message; read from the repartition
record's headers, never from the value) and a `RawSample` (the original bytes). Only the head and tail
candidates' bytes are kept; when the burst closes, the `build_samples` callable decodes and redacts
those alone (`consumer.samples`), so a repeated event costs a key lookup and a few counters.

A burst is a session window over EVENT time, as in Kafka Streams: the events of one key that follow each
other within `quiet_s`, for at most `max_length_s` from the first. Membership does not depend on the
order events arrive in: a key may have several bursts open, an event joins the one it is within
`quiet_s` of, and an event that bridges two merges them. So a backlog read from unkeyed partitions far
apart in time, by several replicas, still counts each burst whole, and replaying the same messages after
a crash rebuilds the same bursts (and the same analysis ids).

A burst closes when no event can join it any more. The caller supplies, per partition, a WATERMARK
(`consumer.watermark`): how far, in the clock of the records' broker timestamps, every input partition
that feeds it has been read, and since when (in this window's clock) all have been seen at their end. A
burst closes once the watermark of every partition it holds is more than `quiet_s` past its last
arrival, or once every input partition was seen at its end `quiet_s` after the burst's last event came
(a live stream gone quiet). Arrival rather than event time, so a server whose clock is off does not rush
the bursts of the others. So that a consumer that never catches up cannot hold a burst (and its offsets)
forever, a burst open for `max_length_s` of wall time closes regardless.
"""

from __future__ import annotations

import heapq
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from analysis.event import Cluster, ErrorEvent
from analysis.intake.quick_key import EventKey
from consumer.open_burst import TALLY_CHARS, OpenBurst, PartitionKey, Position, RawSample, sample_charge
from consumer.watermark import Mark

__all__ = ["BuildSamples", "BurstWindow", "CloseReason", "ClosedBurst", "PartitionKey", "Position", "RawSample",
           "Sighting", "Watermark"]  # fmt: skip

CloseReason = Literal["quiet", "max_length", "evicted", "flush", "rebalance"]
BuildSamples = Callable[[Sequence[RawSample], "Sighting"], tuple[ErrorEvent, ...]]
"""Turns a closing burst's raw samples into decoded, redacted events (its first sighting stands in for
samples that no longer decode)."""
Watermark = Callable[[PartitionKey], "Mark | None"]
"""Per partition: the broker time (epoch seconds) up to which every record that could still reach it has
been read, and the time in the window's clock by which every input partition feeding it was seen at its
end (None: not all yet), so anything still to come was read after then; None while that is not known."""

_BurstKey = tuple[str, str, str]
# Open bursts per key: past this (events scattered far apart in event time), the least recently updated
# closes, so no key costs more than this many comparisons per event.
_MAX_SESSIONS = 32

Sighting = EventKey
"""What the window reads of one event: its burst key and what the counts need, all redacted, as the key
stage reads them (`analysis.intake.quick_key.EventKey`)."""


@dataclass(frozen=True, slots=True)
class ClosedBurst:
    """A burst that will not grow any more: its cluster, why it closed, and the offsets it held."""

    cluster: Cluster
    reason: CloseReason
    offsets: Mapping[PartitionKey, int]
    """Per partition, the lowest offset of the burst's events: nothing from there on may be committed
    until the burst's analysis is published."""
    token: int
    """Unique per burst within this window; the pipeline holds offsets under it."""
    spans: Mapping[PartitionKey, tuple[int, int]] = field(default_factory=dict)
    """Per partition, the first and last offset of the burst's events."""


class BurstWindow:
    """Open bursts keyed by (server, tenant, fingerprint); `add` and `expire` return the ones that close.

    `clock` is the wall clock the length cap is measured against (monotonic by default); `on_open` is
    called with (server, tenant, fingerprint, exception type) when a burst opens; `build_samples` decodes a
    closing burst's samples. Past `max_open` bursts, or past `max_open_bytes` held (the raw bytes of their
    samples, and their counted messages), the least recently updated burst closes early.
    """

    def __init__(
        self,
        quiet_s: float,
        max_length_s: float,
        max_open: int,
        max_samples: int,
        build_samples: BuildSamples,
        clock: Callable[[], float] = time.monotonic,
        on_open: Callable[[str, str, str, str], None] | None = None,
        max_open_bytes: int = 256 << 20,
    ) -> None:
        if max_open < 1 or max_samples < 1 or max_open_bytes < 1:
            raise ValueError("max_open, max_samples and max_open_bytes must be at least 1")
        self.quiet_s = quiet_s
        self.max_length_s = max_length_s
        self.max_open = max_open
        self.max_open_bytes = max_open_bytes
        self.open_bytes = 0
        # The first events show how the burst started, the latest what is deployed now.
        self._head_size = max_samples // 2 or 1
        self._tail_size = max_samples - self._head_size
        self._build_samples = build_samples
        self._clock = clock
        self._on_open = on_open
        # Every open burst by token, ordered by the wall time of its last add: the front is the least
        # recently updated burst, the one evicted past the caps.
        self._open: OrderedDict[int, OpenBurst] = OrderedDict()
        # The open bursts of each key (almost always one; more while events arrive far out of order).
        self._by_key: dict[_BurstKey, list[OpenBurst]] = {}
        self._next_token = 0
        # (opened_wall, token) in opening order, for the wall-time length cap; entries of bursts already
        # closed are skipped when they reach the front.
        self._opened: deque[tuple[float, int]] = deque()
        # Per partition, a heap of (last arrival, token) of the bursts first read from it: the next to
        # come due on its watermark first. An entry is refreshed when it comes up and its burst grew since.
        self._due: dict[PartitionKey, list[tuple[float, int]]] = {}
        # Per partition, the bursts first read from it by the wall time of their last add, for idleness
        # in wall time once every input partition is read to its end.
        self._idle: dict[PartitionKey, OrderedDict[int, OpenBurst]] = {}

    @property
    def open_count(self) -> int:
        """How many bursts are open."""
        return len(self._open)

    def add(self, sighting: Sighting, sample: RawSample, position: Position, arrival: float) -> list[ClosedBurst]:
        """Count one event into its burst; returns the bursts evicted to make room. `arrival` is the
        broker time of the record (`expire`'s watermarks are in that clock)."""
        key = (sighting.server, sighting.tenant, sighting.fingerprint)
        ts = sighting.timestamp
        now = self._clock()
        closed: list[ClosedBurst] = []
        bursts = self._by_key.get(key)
        burst = None
        if bursts is not None:
            burst = bursts[0]
            # The usual case, inlined: one burst, the event within it or just after it.
            if not (len(bursts) == 1 and burst.first_seen <= ts <= burst.first_seen + self.max_length_s
                    and ts <= burst.last_seen + self.quiet_s):
                burst = self._join(bursts, ts)
        if burst is None:
            if len(self._open) >= self.max_open:
                closed.append(self._close(next(iter(self._open.values())), "evicted"))
            if bursts is not None and len(bursts) >= _MAX_SESSIONS:  # events scattered far apart in time
                closed.append(self._close(min(bursts, key=lambda b: b.last_wall), "evicted"))
            burst = OpenBurst(self._next_token, key, sighting, position, arrival)
            self._next_token += 1
            self.open_bytes += burst.nbytes
            self._open[burst.token] = burst
            self._by_key.setdefault(key, []).append(burst)
            self._idle.setdefault(burst.tp, OrderedDict())[burst.token] = burst
            self._opened.append((now, burst.token))
            heapq.heappush(self._due.setdefault(burst.tp, []), (arrival, burst.token))
            if self._on_open is not None:
                self._on_open(*key, sighting.exception_type)
        else:
            self._open.move_to_end(burst.token)
            self._idle[burst.tp].move_to_end(burst.token)
        # Counting is inlined: this runs for every event the service reads.
        burst.count += 1
        burst.last_wall = now
        if arrival > burst.last_arrival:
            burst.last_arrival = arrival
        late = ts < burst.last_seen
        if ts > burst.last_seen:
            burst.last_seen = ts
        elif ts < burst.first_seen:
            burst.first_seen = ts
        commit = sighting.commit
        if commit and commit != burst.last_commit:
            if late:
                burst.count_old_commit(commit)
            else:
                burst.count_commit(commit)
        message = sighting.message
        if len(message) > TALLY_CHARS:  # all the tally reads of it: a megabyte message is not kept whole
            message = message[:TALLY_CHARS]
        if message == burst.message:
            burst.message_count += 1
            nbytes = 0
        else:
            nbytes = burst.count_message(message)
        nbytes += self._keep_late_sample(burst, sample) if late else self._keep_sample(burst, sample)
        burst.nbytes += nbytes
        self.open_bytes += nbytes
        while self.open_bytes > self.max_open_bytes and len(self._open) > 1:
            front = next(iter(self._open.values()))  # never this burst: it was just moved to the end
            closed.append(self._close(front, "evicted"))
        tp, offset = position
        if tp == burst.tp and offset > burst.last_offset:  # the usual case, inlined
            burst.last_offset = offset
        else:
            burst.note_offset(position)
        return closed

    def _join(self, bursts: list[OpenBurst], ts: float) -> OpenBurst | None:
        """The open burst of this key that an event at `ts` joins (merging two it bridges), or None."""
        quiet, length = self.quiet_s, self.max_length_s
        near = [b for b in bursts if b.first_seen - quiet <= ts <= b.last_seen + quiet]
        fits = [b for b in near if max(ts, b.last_seen) - min(ts, b.first_seen) <= length]
        for burst in near:
            if burst not in fits:
                burst.full = True
        if not fits:
            return None
        fits.sort(key=lambda b: b.first_seen)
        joined = fits[0]
        for other in fits[1:]:
            if max(other.last_seen, ts) - min(joined.first_seen, ts) > length:
                break
            if other.token < joined.token:  # keep the older one: the wall-time cap runs from its opening
                joined, other = other, joined
            self._merge(joined, other)
        return joined

    def _merge(self, kept: OpenBurst, other: OpenBurst) -> None:
        del self._open[other.token]
        del self._idle[other.tp][other.token]
        self._by_key[other.key].remove(other)
        self.open_bytes += kept.absorb(other, self._head_size, self._tail_size)

    def _keep_sample(self, burst: OpenBurst, sample: RawSample) -> int:
        """Keep `sample` in the head, or in the tail ring over the oldest tail sample; the bytes added."""
        charge = sample_charge(sample)
        head = burst.head
        if len(head) < self._head_size:
            head.append(sample)
            return charge
        if not self._tail_size:
            return 0
        tail, tail_bytes = burst.tail, burst.tail_bytes
        if tail is None or tail_bytes is None:
            burst.tail, burst.tail_bytes = [sample], [charge]
            return charge
        if len(tail) < self._tail_size:
            tail.append(sample)
            tail_bytes.append(charge)
            return charge
        replaced = tail_bytes[burst.tail_next]
        tail[burst.tail_next], tail_bytes[burst.tail_next] = sample, charge
        burst.tail_next = (burst.tail_next + 1) % self._tail_size
        return charge - replaced

    def _keep_late_sample(self, burst: OpenBurst, sample: RawSample) -> int:
        """Keep an event older than the burst's newest one: in the head while it has room, else in the
        tail only if it is newer than the tail's oldest (the tail keeps the latest events by event time,
        whatever order they came in, so the representative is the newest one)."""
        tail = burst.samples[len(burst.head):]
        if len(burst.head) < self._head_size or not self._tail_size:
            return self._keep_sample(burst, sample)
        before = sum(map(sample_charge, tail))
        tail.append(sample)
        tail.sort(key=lambda kept: kept[2])
        tail = tail[-self._tail_size:]
        burst.tail, burst.tail_bytes, burst.tail_next = tail, [sample_charge(s) for s in tail], 0
        return sum(burst.tail_bytes) - before

    def expire(self, now: float, watermark: Watermark, until: float | None = None) -> list[ClosedBurst]:
        """Close the bursts no event can join any more, and those open for `max_length_s` of wall time.

        A burst can take no more events once, on every partition it holds, the `watermark` is more than
        `quiet_s` past its last arrival, or everything was seen at its end `quiet_s` of wall time after
        the burst got its last event. Closing builds each burst's samples; with `until` (a
        `time.monotonic()` deadline) it stops once past it, after one close at least, and the rest close
        on the next call."""

        def spent() -> bool:
            return until is not None and bool(closed) and time.monotonic() > until

        closed: list[ClosedBurst] = []
        marks: dict[PartitionKey, Mark | None] = {}

        def mark(tp: PartitionKey) -> Mark | None:
            if tp not in marks:
                marks[tp] = watermark(tp)
            return marks[tp]

        def done(burst: OpenBurst) -> bool:
            for tp in (burst.tp, *(burst.partitions or ())):
                moved = mark(tp)
                if moved is None or not (moved[0] - burst.last_arrival > self.quiet_s
                                         or (moved[1] is not None and burst.last_wall <= moved[1] - self.quiet_s)):
                    return False
            return True

        def close(burst: OpenBurst) -> None:
            closed.append(self._close(burst, "max_length" if burst.full else "quiet"))

        for tp, idle in list(self._idle.items()):
            moved = mark(tp) if idle else None
            if moved is None:
                continue
            due, held_back = self._due.get(tp, []), []
            while due and not spent() and moved[0] - due[0][0] > self.quiet_s:
                arrival, token = heapq.heappop(due)
                pending = self._open.get(token)
                if pending is None:
                    continue  # closed or merged away
                if pending.last_arrival > arrival:  # it grew since: due later
                    heapq.heappush(due, (pending.last_arrival, token))
                elif done(pending):
                    close(pending)
                else:
                    held_back.append((arrival, token))  # another partition it holds is not there yet
            for entry in held_back:
                heapq.heappush(due, entry)
            if moved[1] is not None:  # everything seen at its end: idleness in wall time counts too
                for token in list(idle):
                    burst = idle.get(token)
                    if burst is None:
                        continue  # closed just above
                    if spent() or burst.last_wall > moved[1] - self.quiet_s:
                        break
                    if done(burst):  # (one also holding another partition may still be waiting on it)
                        close(burst)
        opened, too_old = self._opened, now - self.max_length_s
        while opened and opened[0][0] <= too_old and not spent():
            _, token = opened.popleft()
            if (expired := self._open.get(token)) is not None:
                closed.append(self._close(expired, "max_length"))
        if len(opened) > 2 * len(self._open) + 64:
            # Evicted and quiet bursts leave entries behind; drop them before they pile up.
            self._opened = deque(entry for entry in opened if entry[1] in self._open)
        if sum(map(len, self._due.values())) > 2 * len(self._open) + 64:
            self._due = {}
            for burst in self._open.values():
                heapq.heappush(self._due.setdefault(burst.tp, []), (burst.last_arrival, burst.token))
        return closed

    def flush(self) -> list[ClosedBurst]:
        """Close every open burst (used when the stream is known to be complete)."""
        return [self._close(burst, "flush") for burst in list(self._open.values())]

    def revoke(self, tps: Collection[PartitionKey]) -> list[ClosedBurst]:
        """Partitions went to another consumer: their open bursts leave this window.

        A burst read only from revoked partitions is dropped: its events are replayed by the new owner from
        the last commit, which is at or before its first offset, so it is rebuilt there (keeping it here
        would count those events twice if the partitions come back). A burst that also holds kept partitions
        (input wrongly declared keyed) closes now, so what this consumer read of it is analysed; it is returned.
        """
        gone = set(tps)
        closing: list[ClosedBurst] = []
        for burst in list(self._open.values()):
            held = burst.spans().keys()
            if held <= gone:
                self._drop(burst)
            elif gone & held:
                closing.append(self._close(burst, "rebalance"))
        return closing

    def held_offsets(self) -> dict[PartitionKey, int]:
        """Per partition, the lowest offset any open burst holds."""
        held: dict[PartitionKey, int] = {}
        for burst in self._open.values():
            for tp, (first, _) in burst.spans().items():
                current = held.get(tp)
                if current is None or first < current:
                    held[tp] = first
        return held

    def _drop(self, burst: OpenBurst) -> None:
        del self._open[burst.token]
        idle = self._idle[burst.tp]
        del idle[burst.token]
        if not idle:
            del self._idle[burst.tp]
        bursts = self._by_key[burst.key]
        bursts.remove(burst)
        if not bursts:
            del self._by_key[burst.key]
        self.open_bytes -= burst.nbytes

    def _close(self, burst: OpenBurst, reason: CloseReason) -> ClosedBurst:
        self._drop(burst)
        server_id, tenant, fingerprint = burst.key
        cluster = Cluster(
            server_id=server_id,
            tenant=tenant,
            fingerprint=fingerprint,
            exception_type=burst.first.exception_type,
            first_seen=burst.first_seen,
            last_seen=burst.last_seen,
            count=burst.count,
            commits=burst.commit_order,
            samples=self._build_samples(sorted(burst.samples, key=lambda sample: sample[2]), burst.first),
            messages=burst.tally(),
        )
        spans = burst.spans()
        return ClosedBurst(cluster=cluster, reason=reason, offsets={tp: span[0] for tp, span in spans.items()},
                           token=burst.token, spans=spans)
