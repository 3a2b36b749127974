"""The window stage: repartition records in, closed bursts out to the analysis workers.

Every record of one (server, fingerprint) arrives on one repartition partition, so its burst is counted
whole by one owner, in order. The stage counts each record from its headers and keeps only the raw
bytes of sample candidates; `build_samples` decodes and redacts those when the burst closes.

A record forwarded twice (its key-stage owner died after forwarding and before committing, and the next
owner forwarded it again) is recognised by its source position: along one source partition, positions
(offset, group) only grow, so a record at or below the last one seen from that partition is a replay and
is skipped. The repartition offset is held by the burst until its analysis is published.

Bursts close on watermarks (`consumer.watermark`): on a repartition partition, the least mark the key
stages sent for the input's partitions; with input keyed by server, how far this replica read the input
partition itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from analysis.errors import BadInput
from analysis.event import ErrorEvent, new_event, new_exception
from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.redact import Redactor, redact_event
from consumer.key_stage import DeadLetters, Keyed
from consumer.keying import read_repartitioned
from consumer.logs import log_event
from consumer.offsets import OffsetTracker
from consumer.settings import WindowSettings
from consumer.watermark import WATERMARK_HEADER, Mark, Marks, Progress, broker_time, not_ahead
from consumer.window import BuildSamples, BurstWindow, ClosedBurst, PartitionKey, Position, RawSample, Sighting
from consumer.workers import ServiceStats

__all__ = ["WindowStage", "sample_builder"]

log = logging.getLogger(__name__)

# A closed burst keeps its last event whole (analysis reads it); of an earlier sample from a message larger
# than this it keeps only what the report shows of it (the message, cut), so queued bursts stay small.
_SLIM_BYTES = 16 * 1024
_SLIM_MESSAGE_CHARS = 1024


def sample_builder(config: DecodeConfig, redactor: Redactor) -> BuildSamples:
    """Decode and redact a closing burst's raw samples; each message is decoded once, however many of its
    records are samples. A sample that no longer decodes (the settings changed between the stages) is
    left out; with none left, the burst's first sighting stands in, redacted like everything else. The last
    sample stays whole; earlier ones from messages over 16 kB keep their message only (`_slim`)."""

    def build(raw: Sequence[RawSample], first: Sighting) -> tuple[ErrorEvent, ...]:
        decoded: dict[int, list[ErrorEvent]] = {}
        samples: list[ErrorEvent] = []
        large: list[bool] = []
        for value, index, received_at in raw:
            events = decoded.get(id(value))
            if events is None:
                try:
                    events = decode_message(value, config, received_at=received_at)
                except BadInput:
                    events = []
                decoded[id(value)] = events
            if index < len(events):
                samples.append(redact_event(events[index], redactor))
                large.append(len(value) > _SLIM_BYTES)
        if samples:
            earlier = [_slim(event) if big else event for event, big in zip(samples[:-1], large, strict=False)]
            return (*earlier, samples[-1])
        return (ErrorEvent(server_id=first.server, timestamp=first.timestamp, message=first.message,
                           commit=first.commit, tenant=first.tenant),)

    return build


def _slim(event: ErrorEvent) -> ErrorEvent:
    """An earlier sample as the report uses it: its message and its root cause's type and message, cut;
    no trace, frames or unknown fields."""
    root = event.root_cause
    chain = (new_exception(root.type[:_SLIM_MESSAGE_CHARS], root.value[:_SLIM_MESSAGE_CHARS]),) if root else ()
    return new_event(event.server_id, event.timestamp, event.message[:_SLIM_MESSAGE_CHARS], event.level,
                     event.logger[:_SLIM_MESSAGE_CHARS], event.commit, event.tenant, chain, "", event.shape, {})


class WindowStage:
    """Counts forwarded (or, with keyed input, local) records into the burst window; `on_closed` takes each
    burst that closes (the pipeline queues it for analysis)."""

    def __init__(self, window: WindowSettings, build_samples: BuildSamples, on_closed: Callable[[ClosedBurst], None],
                 offsets: OffsetTracker, dead_letters: DeadLetters, stats: ServiceStats, input_topic: str,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 tenant: str = "") -> None:
        """`tenant`: the deployment's one tenant (`input.tenant`), redacted as its events' are, or ""."""
        self._settings = window
        self._tenant = tenant
        self.window = BurstWindow(window.quiet_s, window.max_length_s, window.max_open, window.max_samples,
                                  build_samples, clock=clock, on_open=self._burst_opened,
                                  max_open_bytes=window.max_open_bytes)
        self._on_closed = on_closed
        self._wall = wall  # epoch seconds, the key stages' clock for when they saw the input's end
        self._offsets = offsets
        self._dead_letters = dead_letters
        self._stats = stats
        # Per repartition partition, the last source position seen from each source partition.
        self._seen: dict[PartitionKey, dict[PartitionKey, tuple[int, int]]] = {}
        self._marks = Marks(input_topic)  # from the key stages, per repartition partition
        self._progress = Progress()  # of the input partitions this window reads itself (keyed input)
        self.read: dict[PartitionKey, int] = {}
        """Per repartition partition, the offset of the last record read."""

    def ingest(self, tp: PartitionKey, message: Any) -> bool:
        """Count one repartition record, unless it is a replay of one already counted; False for a
        watermark record (cheap: it costs a turn nothing)."""
        offset: int = message.offset
        self._offsets.received(tp, offset)
        self.read[tp] = offset
        headers = message.headers
        try:
            if headers and headers[0][0] == WATERMARK_HEADER:
                self._marks.update(tp, headers[0][1])
                return False
            forwarded = read_repartitioned(headers)
        except BadInput as bad:
            self._dead_letters.send(tp, message, bad.reason, str(bad))
            return True
        except Exception as error:  # a reader bug must not stop the stage on one record (and replay it forever)
            log.exception("repartition record unreadable", extra={"fields": {"partition": tp[1], "offset": offset}})
            self._dead_letters.send(tp, message, "internal_error", type(error).__name__)
            return True
        if self._tenant and any(sighting.tenant != self._tenant for _, sighting in forwarded.records):
            # Forwarded by another deployment's key stage (one sharing this group and its repartition topic),
            # or by one not yet pinned during a rollout: its tenant's events are not analysed here.
            self._dead_letters.send(tp, message, "tenant_mismatch", "forwarded for a tenant other than this "
                                    "deployment's: give each tenant's deployment its own kafka.group_id")
            return True
        seen = self._seen.setdefault(tp, {})
        last = seen.get(forwarded.source)
        if last is not None and forwarded.source_position <= last:
            self._stats.replays_skipped += 1
            return True
        seen[forwarded.source] = forwarded.source_position
        self._stats.records_in += 1
        arrival = not_ahead(forwarded.source_time) if forwarded.source_time is not None else broker_time(message)
        source_topic, source_partition = forwarded.source
        if source_topic == self._marks.input_topic:
            self._marks.saw(tp, source_partition, arrival)
        self.count(forwarded.records, message.value or b"", (tp, offset), arrival)
        return True

    def count(self, records: Iterable[tuple[int, Sighting]], raw: bytes, position: Position, arrival: float) -> None:
        """Count the records of one message (sharing its bytes as their samples) into their bursts;
        `arrival` is the broker time of the input record they came in."""
        add = self.window.add
        for index, sighting in records:
            for closed in add(sighting, (raw, index, sighting.timestamp), position, arrival):
                self._on_closed(closed)

    def count_keyed(self, keyed: Keyed, position: Position) -> None:
        """Count an input message this window reads itself (input keyed by server). Each group of records
        keeps the bytes the key stage gave it: of an OTLP batch of several burst keys, its own slice, so
        closing its burst decodes that slice, not the whole batch again (3,000 keys in a 1 MB batch held the
        loop for minutes), and the burst is charged for the slice alone."""
        self._stats.records_in += 1
        groups, arrival = keyed
        self._progress.read(position[0], arrival)
        add, on_closed = self.window.add, self._on_closed
        for group, value in groups:
            # `count` inlined (this runs for every input message): records numbered from 0 in `value`.
            for index, (_, sighting) in enumerate(group.records):
                for closed in add(sighting, (value, index, sighting.timestamp), position, arrival):
                    on_closed(closed)

    def expire(self, now: float, caught_up: Callable[[PartitionKey], bool], input_partitions: Collection[int] | None,
               until: float | None = None) -> None:
        """Close the bursts no event can join any more, and those open too long in wall time (until the
        `time.monotonic()` deadline `until`), and queue them. `caught_up` says which partitions are read to
        their end; `input_partitions` are the input topic's (None while unknown)."""
        wall = self._wall()

        def watermark(tp: PartitionKey) -> Mark | None:
            through = caught_up(tp)
            if tp[0] == self._marks.input_topic:  # input keyed by server: read here, to its end as of now
                low = self._progress.low(tp)
                if low is None:  # nothing read: whatever comes next arrives from now on
                    return (wall, now) if through else None
                return low, (now if through else None)
            mark = self._marks.watermark(tp, input_partitions)
            if mark is None:
                return None
            # Idleness in wall time counts once this partition too is read to its end, from when the key
            # stages saw the input's end (in this window's clock, never past now: another host's clock).
            at, end = mark
            return at, (now - max(0.0, wall - end) if through and end is not None else None)

        for closed in self.window.expire(now, watermark, until):
            self._on_closed(closed)

    def revoke(self, gone: Collection[PartitionKey]) -> list[ClosedBurst]:
        """Partitions left this replica: forget what was seen on them; the bursts that must still be
        analysed (they also held kept partitions) are queued and returned."""
        for tp in gone:
            self._seen.pop(tp, None)
            self.read.pop(tp, None)
        self._marks.forget(gone)
        self._progress.forget(gone)
        closing = self.window.revoke(gone)
        for closed in closing:
            self._on_closed(closed)
        return closing

    def forget_replays(self) -> None:
        """The broker lost its state (topics recreated): source offsets start over, so none is a replay."""
        self._seen.clear()
        self._marks.forget()

    def _burst_opened(self, server: str, tenant: str, fingerprint: str, exception_type: str) -> None:
        if log.isEnabledFor(logging.DEBUG):
            window = self._settings
            latest = datetime.fromtimestamp(time.time() + window.max_length_s, UTC)
            log.debug("burst opened", extra=log_event(
                "burst-opened", server=server, tenant=tenant, fingerprint=fingerprint,
                exception_type=exception_type, closes_after_quiet_s=window.quiet_s,
                closes_at_latest=latest.isoformat(timespec="seconds").replace("+00:00", "Z")))
