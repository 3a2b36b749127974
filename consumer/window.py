"""Burst windows: count the events of one server and signature into bursts, pure and clock-injected.

The window counts first and builds later. Each event arrives as a `Sighting` (what the burst key and the
counts need: server, tenant, fingerprint, type, event time, commit, message; read from the repartition
record's headers, never from the value) and a `RawSample` (the original bytes). Only the head and tail
candidates' bytes are kept; when the burst closes, the `build_samples` callable decodes and redacts
those alone (`consumer.samples`), so a repeated event costs a key lookup and a few counters.

Membership is decided by EVENT time, so replaying the same messages after a crash rebuilds the same
bursts (and the same analysis ids): an event more than `quiet_s` after its burst's last event, or more
than `max_length_s` after its first, starts a new burst. When a failure simply stops, idleness is
measured in WALL time, and the caller allows that only when it is caught up with the stream: a consumer
that is behind or paused must not close bursts whose next events are still waiting to be read. So that a
consumer that never catches up cannot hold a burst (and its offsets) forever, a burst open for
`max_length_s` of wall time closes regardless.

Event-time gaps are only meaningful when a burst's events reach one window in order: the repartition
topic keyed by (server, fingerprint) guarantees that (`consumer.key_stage`), as does input already keyed
by server (`input.keyed_by_server`).
"""

from __future__ import annotations

import sys
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from analysis.cache import OBJECT_BYTES
from analysis.event import Cluster, ErrorEvent, MessageTally
from analysis.intake.quick_key import EventKey
from analysis.intake.tally import message_template, tally_messages

__all__ = ["BuildSamples", "BurstWindow", "CloseReason", "ClosedBurst", "PartitionKey", "Position", "RawSample",
           "Sighting"]  # fmt: skip

CloseReason = Literal["quiet", "max_length", "evicted", "flush", "rebalance"]
PartitionKey = tuple[str, int]
"""(topic, partition); aiokafka's TopicPartition is such a tuple."""
Position = tuple[PartitionKey, int]
"""Where a message came from: ((topic, partition), offset)."""
RawSample = tuple[bytes, int, float]
"""A sample candidate as received: (original message bytes, index of the record in it, event time).
Several records of one OTLP message share its bytes object."""
BuildSamples = Callable[[Sequence[RawSample], "Sighting"], tuple[ErrorEvent, ...]]
"""Turns a closing burst's raw samples into decoded, redacted events (its first sighting stands in for
samples that no longer decode)."""

_BurstKey = tuple[str, str, str]
# Distinct commits kept per burst: a burst spanning more deploys than this is already unusual.
_MAX_COMMITS = 16
# Distinct messages counted as logged per burst; past that (an id in every message), new ones are counted
# by template (`_count_by_template`), up to as many templates again; the rest go uncounted.
_MAX_MESSAGES = 16
# The tally reads no further into a message than this (tally.py masks and templates its first 512 chars).
_TALLY_CHARS = 512


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


class _Burst:
    """An open burst; mutable and private so adding an event copies nothing. Containers are made only
    when a second value needs one (most bursts see one commit, one message and one partition), which
    keeps a burst's own cost small beside the bytes it holds."""

    __slots__ = ("commits", "count", "first", "first_offset", "first_seen", "head", "last_commit",
                 "last_offset", "last_seen", "last_wall", "message", "message_count", "messages", "nbytes",
                 "partitions", "tail", "tail_bytes", "tail_next", "templates", "token", "tp")  # fmt: skip

    def __init__(self, token: int, sighting: Sighting, position: Position) -> None:
        self.token = token
        self.first = sighting
        self.first_seen = self.last_seen = sighting.timestamp
        self.last_wall = 0.0
        self.count = 0
        self.last_commit: str | None = None
        self.commits: dict[str, None] | None = None  # every commit, the last one seen last, from the 2nd on
        self.message = sighting.message[:_TALLY_CHARS]
        self.message_count = 0
        self.nbytes = OBJECT_BYTES + sys.getsizeof(self.message)  # what the burst holds, samples included
        self.messages: dict[str, int] | None = None  # other messages, once there are any
        self.templates: dict[bytes, list[Any]] | None = None  # template -> [count, first message]
        self.head: list[RawSample] = []
        self.tail: list[RawSample] | None = None  # a ring once full; `tail_next` is its oldest entry
        self.tail_bytes: list[int] | None = None  # what each tail sample is charged, aligned with `tail`
        self.tail_next = 0
        self.tp, self.first_offset = position
        self.last_offset = self.first_offset
        self.partitions: dict[PartitionKey, list[int]] | None = None  # [first, last] of further partitions


def _count_message(burst: _Burst, message: str) -> int:
    """Count `message` (cut to what the tally reads); returns the bytes a newly kept message holds."""
    messages = burst.messages
    if messages is None:
        burst.messages = {message: 1}
        return OBJECT_BYTES + sys.getsizeof(message)
    seen = messages.get(message)
    if seen is not None:
        messages[message] = seen + 1
    elif len(messages) < _MAX_MESSAGES - 1:
        messages[message] = 1
        return OBJECT_BYTES + sys.getsizeof(message)
    else:
        return _count_by_template(burst, message)
    return 0


def _count_by_template(burst: _Burst, message: str) -> int:
    """Count `message` under its template, a cheap stand-in for its masked form (no regex per event);
    returns the bytes a new template holds."""
    if burst.templates is None:
        burst.templates = {}
    key = message_template(message)
    entry = burst.templates.get(key)
    if entry is not None:
        entry[0] += 1
    elif len(burst.templates) < _MAX_MESSAGES:
        burst.templates[key] = [1, message]
        return 2 * OBJECT_BYTES + sys.getsizeof(key) + sys.getsizeof(message)
    return 0


def _count_commit(burst: _Burst, commit: str) -> None:
    """Keep `commit` once, as the last one seen (that is the commit analysis reads)."""
    if burst.last_commit is None:
        burst.last_commit = commit
        return
    commits = burst.commits
    if commits is None:
        commits = burst.commits = {burst.last_commit: None}
    if commit in commits:
        del commits[commit]
    elif len(commits) >= _MAX_COMMITS:
        del commits[next(iter(commits))]
    commits[commit] = None
    burst.last_commit = commit


def _tally(burst: _Burst) -> tuple[MessageTally, ...]:
    counts = {burst.message: burst.message_count} if burst.message_count else {}
    for message, count in (burst.messages or {}).items():
        counts[message] = counts.get(message, 0) + count
    for count, example in (burst.templates or {}).values():
        counts[example] = counts.get(example, 0) + count
    return tally_messages(counts)


def _held(burst: _Burst) -> dict[PartitionKey, tuple[int, int]]:
    """The burst's first and last offset per partition."""
    spans = {burst.tp: (burst.first_offset, burst.last_offset)}
    for tp, (first, last) in (burst.partitions or {}).items():
        spans[tp] = (first, last)
    return spans


class BurstWindow:
    """Open bursts keyed by (server, tenant, fingerprint); `add` and `expire` return the ones that close.

    `clock` is the wall clock `expire(now)` is measured against (monotonic by default); `on_open` is called
    with (server, tenant, fingerprint, exception type) when a burst opens; `build_samples` decodes a closing
    burst's samples. Past `max_open` bursts, or past `max_open_bytes` held (the raw bytes of their samples,
    and their counted messages), the least recently updated burst closes early.
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
        # Ordered by the wall time of the last add: the front is the least recently updated burst,
        # which is both the next to go quiet and the one evicted past the cap.
        self._open: OrderedDict[_BurstKey, _Burst] = OrderedDict()
        self._next_token = 0
        # (opened_wall, token, key) in opening order, for the wall-time length cap; entries of bursts
        # already closed are skipped when they reach the front.
        self._opened: deque[tuple[float, int, _BurstKey]] = deque()

    @property
    def open_count(self) -> int:
        """How many bursts are open."""
        return len(self._open)

    def add(self, sighting: Sighting, sample: RawSample, position: Position) -> list[ClosedBurst]:
        """Count one event into its burst; returns the bursts this closed (its own old one, an evicted one)."""
        key = (sighting.server, sighting.tenant, sighting.fingerprint)
        ts = sighting.timestamp
        now = self._clock()
        closed: list[ClosedBurst] = []
        open_bursts = self._open
        burst = open_bursts.get(key)
        if burst is not None:
            if ts - burst.last_seen > self.quiet_s:
                closed.append(self._close(key, "quiet"))
                burst = None
            elif ts - burst.first_seen > self.max_length_s:
                closed.append(self._close(key, "max_length"))
                burst = None
        if burst is None:
            if len(open_bursts) >= self.max_open:
                closed.append(self._close(next(iter(open_bursts)), "evicted"))
            burst = _Burst(self._next_token, sighting, position)
            self.open_bytes += burst.nbytes
            self._next_token += 1
            open_bursts[key] = burst
            self._opened.append((now, burst.token, key))
            if self._on_open is not None:
                self._on_open(*key, sighting.exception_type)
        else:
            open_bursts.move_to_end(key)
        # Counting is inlined: this runs for every event the service reads.
        burst.count += 1
        burst.last_wall = now
        # Out-of-order events widen the burst rather than open a new one.
        if ts > burst.last_seen:
            burst.last_seen = ts
        elif ts < burst.first_seen:
            burst.first_seen = ts
        commit = sighting.commit
        if commit and commit != burst.last_commit:
            _count_commit(burst, commit)
        message = sighting.message
        if len(message) > _TALLY_CHARS:  # all the tally reads of it: a megabyte message is not kept whole
            message = message[:_TALLY_CHARS]
        nbytes = 0
        if message == burst.message:
            burst.message_count += 1
        else:
            nbytes = _count_message(burst, message)
        head = burst.head
        # A sample holds its message's bytes (shared by the records of one batch: charged to each, which
        # errs on the safe side).
        charge = OBJECT_BYTES + len(sample[0])
        if len(head) < self._head_size:
            head.append(sample)
            nbytes += charge
        elif self._tail_size:
            tail, tail_bytes = burst.tail, burst.tail_bytes
            if tail is None or tail_bytes is None:
                burst.tail, burst.tail_bytes = [sample], [charge]
                nbytes += charge
            elif len(tail) < self._tail_size:
                tail.append(sample)
                tail_bytes.append(charge)
                nbytes += charge
            else:
                nbytes += charge - tail_bytes[burst.tail_next]
                tail[burst.tail_next], tail_bytes[burst.tail_next] = sample, charge
                burst.tail_next = (burst.tail_next + 1) % self._tail_size
        burst.nbytes += nbytes
        self.open_bytes += nbytes
        while self.open_bytes > self.max_open_bytes and len(open_bursts) > 1:  # the front is never this one
            closed.append(self._close(next(iter(open_bursts)), "evicted"))
        tp, offset = position
        # Offsets grow within a partition, so the first one seen is the lowest and the last the highest.
        if tp == burst.tp:
            burst.last_offset = offset
        elif burst.partitions is None:
            burst.partitions = {tp: [offset, offset]}
        elif tp in burst.partitions:
            burst.partitions[tp][1] = offset
        else:
            burst.partitions[tp] = [offset, offset]
        return closed

    def expire(self, now: float, idle_by_wall: bool = True, until: float | None = None) -> list[ClosedBurst]:
        """Close the bursts open for `max_length_s` of wall time and, when `idle_by_wall` (the caller is
        caught up), those that received nothing for `quiet_s` of wall time. Closing builds each burst's
        samples; with `until` (a `time.monotonic()` deadline) it stops once past it, after one close at
        least, and the rest close on the next call."""

        def spent() -> bool:
            return until is not None and bool(closed) and time.monotonic() > until

        closed: list[ClosedBurst] = []
        if idle_by_wall:
            deadline = now - self.quiet_s
            while self._open and not spent():
                key, burst = next(iter(self._open.items()))
                if burst.last_wall > deadline:
                    break
                closed.append(self._close(key, "quiet"))
        opened, too_old = self._opened, now - self.max_length_s
        while opened and opened[0][0] <= too_old and not spent():
            _, token, key = opened.popleft()
            if self._is_open(key, token):
                closed.append(self._close(key, "max_length"))
        if len(opened) > 2 * len(self._open) + 64:
            # Evicted and quiet bursts leave entries behind; drop them before they pile up.
            self._opened = deque(entry for entry in opened if self._is_open(entry[2], entry[1]))
        return closed

    def _is_open(self, key: _BurstKey, token: int) -> bool:
        """Whether the burst `token` is still the open one under `key`."""
        burst = self._open.get(key)
        return burst is not None and burst.token == token

    def flush(self) -> list[ClosedBurst]:
        """Close every open burst (used when the stream is known to be complete)."""
        return [self._close(key, "flush") for key in list(self._open)]

    def revoke(self, tps: Collection[PartitionKey]) -> list[ClosedBurst]:
        """Partitions went to another consumer: their open bursts leave this window.

        A burst read only from revoked partitions is dropped: its events are replayed by the new owner from
        the last commit, which is at or before its first offset, so it is rebuilt there (keeping it here
        would count those events twice if the partitions come back). A burst that also holds kept partitions
        (input wrongly declared keyed) closes now, so what this consumer read of it is analysed; it is returned.
        """
        gone = set(tps)
        closing: list[ClosedBurst] = []
        for key, burst in list(self._open.items()):
            held = _held(burst).keys()
            if held <= gone:
                del self._open[key]
                self.open_bytes -= burst.nbytes
            elif gone & held:
                closing.append(self._close(key, "rebalance"))
        return closing

    def held_offsets(self) -> dict[PartitionKey, int]:
        """Per partition, the lowest offset any open burst holds."""
        held: dict[PartitionKey, int] = {}
        for burst in self._open.values():
            current = held.get(burst.tp)
            if current is None or burst.first_offset < current:
                held[burst.tp] = burst.first_offset
            for tp, (first, _) in (burst.partitions or {}).items():
                current = held.get(tp)
                if current is None or first < current:
                    held[tp] = first
        return held

    def _close(self, key: _BurstKey, reason: CloseReason) -> ClosedBurst:
        burst = self._open.pop(key)
        self.open_bytes -= burst.nbytes
        server_id, tenant, fingerprint = key
        tail = burst.tail or []
        raw = (*burst.head, *tail[burst.tail_next:], *tail[:burst.tail_next])
        commits = tuple(burst.commits) if burst.commits else (burst.last_commit,) if burst.last_commit else ()
        cluster = Cluster(
            server_id=server_id,
            tenant=tenant,
            fingerprint=fingerprint,
            exception_type=burst.first.exception_type,
            first_seen=burst.first_seen,
            last_seen=burst.last_seen,
            count=burst.count,
            commits=commits,
            samples=self._build_samples(raw, burst.first),
            messages=_tally(burst),
        )
        spans = _held(burst)
        return ClosedBurst(cluster=cluster, reason=reason, offsets={tp: span[0] for tp, span in spans.items()},
                           token=burst.token, spans=spans)
