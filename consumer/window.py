"""Burst windows: group events of one server and signature into bursts, pure and clock-injected.

Membership is decided by EVENT time, so replaying the same messages after a crash rebuilds the same
bursts (and the same analysis ids): an event more than `quiet_s` after its burst's last event, or more
than `max_length_s` after its first, starts a new burst. When a failure simply stops, idleness is
measured in WALL time, and the caller allows that only when it is caught up with the stream: a consumer
that is behind or paused must not close bursts whose next events are still waiting to be read. So that a
consumer that never catches up cannot hold a burst (and its offsets) forever, a burst open for
`max_length_s` of wall time closes regardless.

Event-time gaps are only meaningful when a server's events arrive in order, that is when producers key
messages by server id (Kafka orders within a partition only). Unkeyed input spread over partitions can
split a burst in two; no event is lost, but the halves are analysed separately.
"""

from __future__ import annotations

import sys
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import orjson

from analysis.cache import OBJECT_BYTES
from analysis.event import Cluster, ErrorEvent, ExceptionInfo, MessageTally, new_event, new_exception
from analysis.intake.tally import message_template, tally_messages

if TYPE_CHECKING:
    from analysis.intake.signature import Signature

__all__ = ["BurstWindow", "CloseReason", "ClosedBurst", "PartitionKey", "Position"]

CloseReason = Literal["quiet", "max_length", "evicted", "flush", "rebalance"]
PartitionKey = tuple[str, int]
"""(topic, partition); aiokafka's TopicPartition is such a tuple."""
Position = tuple[PartitionKey, int]
"""Where a message came from: ((topic, partition), offset)."""

_BurstKey = tuple[str, str, str]
# Distinct commits kept per burst: a burst spanning more deploys than this is already unusual.
_MAX_COMMITS = 16
# Distinct messages counted as logged per burst; past that (an id in every message), new ones are counted
# by template (`_count_by_template`), up to as many templates again; the rest go uncounted.
_MAX_MESSAGES = 16
# The tally reads no further into a message than this (tally.py masks and templates its first 512 chars).
_TALLY_CHARS = 512
# A closed burst keeps its last event whole (analysis reads it); of a larger earlier sample it keeps only
# what the report shows of it (the message, cut), so queued bursts stay small whatever came in.
_SLIM_BYTES = 16 * 1024
_SLIM_MESSAGE_CHARS = 1024


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
    """An open burst; mutable and private so adding an event copies nothing."""

    __slots__ = (
        "commits",
        "count",
        "exception_type",
        "first_seen",
        "head",
        "key",
        "last_commit",
        "last_offsets",
        "last_seen",
        "last_wall",
        "messages",
        "nbytes",
        "offsets",
        "sample_bytes",
        "tail",
        "tail_bytes",
        "templates",
        "token",
    )

    def __init__(self, key: _BurstKey, token: int, exception_type: str, event: ErrorEvent,
                 tail_size: int) -> None:
        self.key = key
        self.token = token
        self.exception_type = exception_type
        self.first_seen = event.timestamp
        self.last_seen = event.timestamp
        self.last_wall = 0.0
        self.count = 0
        self.commits: dict[str, None] = {}
        self.last_commit: str | None = None  # the last key of `commits`, checked without an iterator
        self.head: list[ErrorEvent] = []
        self.tail: deque[ErrorEvent] = deque(maxlen=tail_size)
        self.messages: dict[str, int] = {}
        self.templates: dict[bytes, list[Any]] | None = None  # template -> [count, first message]
        self.sample_bytes: list[int] = []  # what each head sample costs, then in tail_bytes each tail one's
        self.tail_bytes: deque[int] = deque(maxlen=tail_size)
        self.nbytes = 0
        self.offsets: dict[PartitionKey, int] = {}
        self.last_offsets: dict[PartitionKey, int] = {}


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


def _tally(burst: _Burst) -> tuple[MessageTally, ...]:
    counts = dict(burst.messages)
    for count, example in (burst.templates or {}).values():
        counts[example] = counts.get(example, 0) + count
    return tally_messages(counts)


class BurstWindow:
    """Open bursts keyed by (server, tenant, fingerprint); `add` and `expire` return the ones that close.

    `clock` is the wall clock `expire(now)` is measured against (monotonic by default); `on_open` is called
    with (server, tenant, fingerprint, exception type) when a burst opens. Past `max_open` bursts, or past
    `max_open_bytes` of samples and counted messages held (as `sample_bytes` estimates them), the least
    recently updated burst closes early.
    """

    def __init__(
        self,
        quiet_s: float,
        max_length_s: float,
        max_open: int,
        max_samples: int,
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
        self._head_size = max_samples // 2
        self._tail_size = max_samples - self._head_size
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

    def add(self, event: ErrorEvent, signature: Signature, position: Position, raw_bytes: int | None = None
            ) -> list[ClosedBurst]:
        """Put one event into its burst; returns the bursts this closed (its own old one, an evicted one).

        `raw_bytes` is the size of the message the event was decoded from (its share of it, for a batch):
        every string of the event came out of it, so the sample is charged that instead of measuring them.
        """
        key = (event.server_id, event.tenant, signature.fingerprint)
        ts = event.timestamp
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
            burst = _Burst(key, self._next_token, signature.exception_type or event.exception_type, event,
                           self._tail_size)
            self._next_token += 1
            open_bursts[key] = burst
            self._opened.append((now, burst.token, key))
            if self._on_open is not None:
                self._on_open(*key, burst.exception_type)
        else:
            open_bursts.move_to_end(key)
        # Recording is inlined: this runs for every event the service reads.
        burst.count += 1
        burst.last_wall = now
        # Out-of-order events widen the burst rather than open a new one.
        if ts > burst.last_seen:
            burst.last_seen = ts
        elif ts < burst.first_seen:
            burst.first_seen = ts
        commit = event.commit
        if commit and commit != burst.last_commit:
            commits = burst.commits
            if commit in commits:
                del commits[commit]  # keep the last one seen last: that is the commit analysis reads
            elif len(commits) >= _MAX_COMMITS:
                del commits[next(iter(commits))]
            commits[commit] = None
            burst.last_commit = commit
        chain = event.exceptions  # `event.exception_message`, inlined
        message = (chain[-1].value if chain else "") or event.message
        if len(message) > _TALLY_CHARS:  # all the tally reads of it: a megabyte message is not kept whole
            message = message[:_TALLY_CHARS]
        messages = burst.messages
        seen = messages.get(message)
        nbytes = 0
        if seen is not None:
            messages[message] = seen + 1
        elif len(messages) < _MAX_MESSAGES:
            messages[message] = 1
            nbytes = OBJECT_BYTES + sys.getsizeof(message)
        else:
            nbytes = _count_by_template(burst, message)
        head = burst.head
        if len(head) < self._head_size:
            charge = sample_bytes(event, head[0] if head else None, raw_bytes)
            head.append(event)
            burst.sample_bytes.append(charge)
            nbytes += charge
        elif self._tail_size:
            charge = sample_bytes(event, head[0] if head else None, raw_bytes)
            tail, tail_bytes = burst.tail, burst.tail_bytes
            dropped = tail_bytes[0] if len(tail) == self._tail_size else 0  # the deques drop it on append
            tail.append(event)
            tail_bytes.append(charge)
            nbytes += charge - dropped
        burst.nbytes += nbytes
        self.open_bytes += nbytes
        while self.open_bytes > self.max_open_bytes and len(open_bursts) > 1:  # the front is never this one
            closed.append(self._close(next(iter(open_bursts)), "evicted"))
        tp, offset = position
        # Offsets grow within a partition, so the first one seen is the lowest and the last the highest.
        if tp not in burst.offsets:
            burst.offsets[tp] = offset
        burst.last_offsets[tp] = offset
        return closed

    def expire(self, now: float, idle_by_wall: bool = True) -> list[ClosedBurst]:
        """Close the bursts open for `max_length_s` of wall time and, when `idle_by_wall` (the caller is
        caught up), those that received nothing for `quiet_s` of wall time."""
        closed: list[ClosedBurst] = []
        if idle_by_wall:
            deadline = now - self.quiet_s
            while self._open:
                key, burst = next(iter(self._open.items()))
                if burst.last_wall > deadline:
                    break
                closed.append(self._close(key, "quiet"))
        opened, too_old = self._opened, now - self.max_length_s
        while opened and opened[0][0] <= too_old:
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
        (unkeyed input) closes now, so what this consumer read of it is analysed; it is returned.
        """
        gone = set(tps)
        closing: list[ClosedBurst] = []
        for key, burst in list(self._open.items()):
            held = burst.offsets.keys()
            if held and held <= gone:
                del self._open[key]
                self.open_bytes -= burst.nbytes
            elif gone & held:
                closing.append(self._close(key, "rebalance"))
        return closing

    def held_offsets(self) -> dict[PartitionKey, int]:
        """Per partition, the lowest offset any open burst holds."""
        held: dict[PartitionKey, int] = {}
        for burst in self._open.values():
            for tp, offset in burst.offsets.items():
                current = held.get(tp)
                if current is None or offset < current:
                    held[tp] = offset
        return held

    def _close(self, key: _BurstKey, reason: CloseReason) -> ClosedBurst:
        burst = self._open.pop(key)
        self.open_bytes -= burst.nbytes
        server_id, tenant, fingerprint = key
        samples = (*burst.head, *burst.tail)
        charged = (*burst.sample_bytes, *burst.tail_bytes)
        earlier = [_slim(event) if nbytes > _SLIM_BYTES else event
                   for event, nbytes in zip(samples[:-1], charged[:-1], strict=True)]
        cluster = Cluster(
            server_id=server_id,
            tenant=tenant,
            fingerprint=fingerprint,
            exception_type=burst.exception_type,
            first_seen=burst.first_seen,
            last_seen=burst.last_seen,
            count=burst.count,
            commits=tuple(burst.commits),
            samples=(*earlier, samples[-1]),
            messages=_tally(burst),
        )
        spans = {tp: (first, burst.last_offsets[tp]) for tp, first in burst.offsets.items()}
        return ClosedBurst(cluster=cluster, reason=reason, offsets=dict(burst.offsets), token=burst.token,
                           spans=spans)


def sample_bytes(event: ErrorEvent, reference: ErrorEvent | None = None, raw_bytes: int | None = None) -> int:
    """What holding `event` in a burst costs, about: its strings (measured, or `raw_bytes` when the size of
    the message they came from is known) and objects, not counting the parsed frames it shares with
    `reference` (events of one trace share their frames tuples)."""
    exceptions = event.exceptions
    if raw_bytes is None:
        size = sys.getsizeof
        nbytes = OBJECT_BYTES + size(event.message) + size(event.raw_trace)
        nbytes += sum([size(exception.value) for exception in exceptions])
        if event.extra:
            nbytes += _value_bytes(event.extra)
    else:
        # Its strings came out of the message's bytes; a wide character widens a whole string (up to four
        # bytes a character), which is checked on the two large ones. (`sys.getsizeof` would cost more
        # than the rest of the window's work.)
        message, trace = event.message, event.raw_trace
        nbytes = OBJECT_BYTES + raw_bytes
        if not (message.isascii() and trace.isascii()):
            nbytes += 3 * (len(message) + len(trace))
        for value in event.extra.values():
            if type(value) is dict or type(value) is list:  # containers cost more than their JSON text
                nbytes += _value_bytes(value)
    if exceptions:
        shared = reference.exceptions if reference is not None else ()
        if not (len(exceptions) == 1 and len(shared) == 1 and shared[0].frames is exceptions[0].frames):
            nbytes += _frames_bytes(event, shared, raw_bytes is None)  # the usual repeat of a trace has none
    return nbytes


def _frames_bytes(event: ErrorEvent, shared: tuple[ExceptionInfo, ...], measure: bool) -> int:
    """The frames `event` does not share with the reference: an object each, and their strings."""
    size = sys.getsizeof
    nbytes = 0
    trace = event.raw_trace
    for index, exception in enumerate(event.exceptions):
        nbytes += OBJECT_BYTES
        frames = exception.frames
        if frames and not (index < len(shared) and shared[index].frames is frames):
            nbytes += OBJECT_BYTES * len(frames)
            if trace:  # frames parsed from the trace are cut from it: at most its size again, once
                nbytes, trace = nbytes + size(trace), ""
            elif measure and not event.raw_trace:  # structured frames: their strings are theirs alone
                nbytes += sum([size(f.function) + size(f.filename) + size(f.abs_path) + size(f.module)
                               for f in frames])
    return nbytes


def _value_bytes(value: Any) -> int:
    """Unknown fields as decoded from JSON: their JSON text twice over (the strings, and slack for their
    headers), plus 64 bytes an item (a comma apart), what an empty container or a number costs at most."""
    try:
        text = orjson.dumps(value)
    except TypeError:  # not made from JSON after all: a rough count of its items instead
        return OBJECT_BYTES * (1 + len(value))
    return 2 * len(text) + OBJECT_BYTES + 64 * text.count(b",")


def _slim(event: ErrorEvent) -> ErrorEvent:
    """An earlier sample as the report uses it: its message and its root cause's type and message, cut;
    no trace, frames or unknown fields."""
    root = event.root_cause
    chain = (new_exception(root.type[:_SLIM_MESSAGE_CHARS], root.value[:_SLIM_MESSAGE_CHARS]),) if root else ()
    return new_event(event.server_id, event.timestamp, event.message[:_SLIM_MESSAGE_CHARS], event.level,
                     event.logger[:_SLIM_MESSAGE_CHARS], event.commit, event.tenant, chain, "", event.shape, {})
