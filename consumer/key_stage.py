"""The key stage: input messages in, each forwarded to the owner of its burst key (or to the DLQ).

It reads each message's burst keys (`consumer.keying`) and sends the ORIGINAL bytes to the repartition
topic, keyed by (server, fingerprint), with what the window needs in headers. The input offset stays held
until every forward of the message (or its DLQ copy) is acknowledged, so the input is committed only past
work that is safely in Kafka. A forward that fails for good raises from `check`/`settle`: the service
goes down loudly and the restart replays from the last commit (the window stage recognises the replays).

Forwards are handed to the producer in whole batches, one per repartition partition and turn of the loop
(`flush`), not one `send` each (~3 us a forward instead of ~35). `ingest` only queues them, without ever
yielding to the event loop; `flush` takes the whole queue before its first await, and each queued
forward goes in exactly one batch, sent once. So a rebalance, whose revoke callback may run while `flush`
waits on the producer, never sees a forward twice: it waits (`settle`) for the batches sent so far, and a
forward not yet sent keeps its message's offset held, so the revoke commits below it (the partition's next
owner replays it; if this process sends it afterwards, the windows skip the second copy as a replay).

Every `repartition.watermark_interval_ms`, busy or idle, it also sends every repartition partition a
watermark record: how far it has read each input partition it owns and when it last saw each at its end
(`consumer.watermark`), which lets the windows close bursts.

With `input.keyed_by_server` the stage forwards nothing: `key` hands the keyed groups straight to the window
stage in this process (`Keyed`), and the input offsets are then held by the bursts themselves.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Collection
from typing import Any, NamedTuple, TypeVar

from aiokafka.record.default_records import DefaultRecordBatchBuilder

from analysis.errors import BadInput
from consumer.kafka import EventSink, dlq_copy, dlq_headers, partition_by_key
from consumer.keying import KeyedGroup, KeyReader, forwarded_values, group_sightings, repartition_record
from consumer.logs import log_fields
from consumer.metrics import Metrics
from consumer.offsets import OffsetTracker
from consumer.settings import KafkaSettings
from consumer.watermark import Progress, broker_time, watermark_record
from consumer.window import PartitionKey
from consumer.workers import ServiceStats

__all__ = ["SETTLE_WAIT_S", "DeadLetters", "KeyStage", "Keyed"]

log = logging.getLogger(__name__)

_F = TypeVar("_F", bound=asyncio.Future[Any])

# Longest a settle waits for acknowledgements: a producer retries each batch for up to 40 s while the
# broker is away, and neither a rebalance callback nor a SIGTERM may wait that long. What is still
# unacknowledged keeps its offset held (uncommitted, replayed by the next owner).
SETTLE_WAIT_S = 10.0


class Keyed(NamedTuple):
    """An input message read: its records grouped by burst key, each group with the bytes it is forwarded
    and sampled as (the message itself, or the group's own slice of an OTLP batch: `forwarded_values`), and
    the message's broker time. A named tuple: built for every message, it costs 0.2 us where a frozen
    dataclass costs 0.85."""

    groups: list[tuple[KeyedGroup, bytes]]
    broker_time: float


class DeadLetters:
    """Sends bad messages to the DLQ with a reason, holding their offsets until the broker has them."""

    def __init__(self, kafka: KafkaSettings, offsets: OffsetTracker, metrics: Metrics, stats: ServiceStats,
                 redact: Callable[[str], str]) -> None:
        self._kafka = kafka
        self._sink: EventSink | None = None
        self._offsets = offsets
        self._metrics = metrics
        self._stats = stats
        self._redact = redact
        self._pending: list[asyncio.Future[None]] = []

    def start(self, sink: EventSink) -> None:
        """Publish through `sink` (a started producer's) from now on."""
        self._sink = sink

    def send(self, tp: PartitionKey, message: Any, reason: str, error: str) -> None:
        """Queue `message` for the DLQ; its offset is released once the copy is acknowledged."""
        kafka = self._kafka
        token = ("dlq", tp, message.offset)
        self._offsets.hold(tp, message.offset, token)
        # What we add is redacted; the original bytes go as they came, cut past their caps.
        key, value, headers = dlq_copy(
            message.key, message.value or b"",
            dlq_headers(reason, tp, message.offset, self._redact(error), kafka.dlq_error_max_chars),
            kafka.dlq_max_value_bytes)

        async def deliver() -> None:
            assert self._sink is not None, "DeadLetters.start was not called"
            await self._sink.publish(kafka.dlq_topic, key, value, headers)
            self._offsets.release(token)

        # Deliveries are batched by the producer; the next commit stops below any not yet acknowledged.
        self._pending.append(asyncio.ensure_future(deliver()))
        self._stats.dlq += 1
        self._metrics.dlq.labels(reason).inc()
        self._metrics.published.labels("dlq").inc()

    async def settle(self, timeout_s: float | None = None) -> None:
        """Wait until every queued DLQ copy is acknowledged, for `timeout_s` at most (the rest stay queued);
        a copy that failed re-raises its error."""
        await _settle(list(self._pending), SETTLE_WAIT_S if timeout_s is None else timeout_s)
        self._pending = _unsettled(self._pending)  # the list as it is now: a copy may have been queued meanwhile


class _Held:
    """An input message's offset, held until its `waiting` forwards are acknowledged."""

    __slots__ = ("token", "waiting")

    def __init__(self, token: tuple[str, PartitionKey, int], waiting: int) -> None:
        self.token = token
        self.waiting = waiting


_Forward = tuple[bytes, bytes, list[tuple[str, bytes]], _Held]
"""A queued forward: key, value, headers, and the message it came from."""


class KeyStage:
    """Reads the burst keys of input messages and forwards them (or returns them, when keyed)."""

    def __init__(self, repartition_topic: str, reader: KeyReader, sink: EventSink, offsets: OffsetTracker,
                 dead_letters: DeadLetters, metrics: Metrics, stats: ServiceStats, *, forward: bool,
                 mark_every_s: float, max_forward_bytes: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._repartition_topic = repartition_topic
        self._reader = reader
        self._sink = sink
        self._offsets = offsets
        self._dead_letters = dead_letters
        self._stats = stats
        self._forward = forward
        self._max_forward_bytes = max_forward_bytes
        self._accepted = metrics.events.labels("accepted")
        self._keyed = 0  # accepted by `key` since the last `check`, which counts them in one update
        self._dlq = metrics.events.labels("dlq")
        self._forwarded = metrics.published.labels("repartition")
        self._acks: list[asyncio.Future[Any]] = []  # one per batch handed to the producer
        self._queued: list[_Forward] = []  # since the last flush
        self._clock = clock
        self.progress = Progress()
        """How far each owned input partition is read (its watermarks)."""
        # Idle too: a window closes a quiet burst only once a mark says the input's end was seen after it.
        self._mark_every_s = mark_every_s
        self._last_mark = -math.inf
        self.forwarded: dict[PartitionKey, int] = {}
        """Per repartition partition, the highest offset this stage's forwards were acknowledged at."""

    @property
    def pending(self) -> int:
        """Forwards queued, and batches of them not yet acknowledged."""
        return len(self._queued) + len(self._acks)

    def key(self, tp: PartitionKey, message: Any) -> Keyed | None:
        """Key one input message for this process's own window (input keyed by server); None when it went
        to the DLQ. Never raises on input. It is counted as accepted at the turn's `check`."""
        keyed = self._read(tp, message)
        if keyed is not None:
            self._keyed += 1
        return keyed

    def ingest(self, tp: PartitionKey, message: Any) -> None:
        """Key one input message and queue its forwards to the owner of its burst key (sent at the next
        `flush`), or send it to the DLQ. Never raises on input."""
        keyed = self._read(tp, message)
        if keyed is None:
            return
        groups, received = keyed
        offset: int = message.offset
        split = len(groups) > 1  # each value holds its group's records alone
        records = [(group.partition_key, value, repartition_record(group, index, tp, offset, split, received))
                   for index, (group, value) in enumerate(groups)]
        # The headers repeat each record's message, so an accepted input can make a forward the producer
        # refuses (it raised here, and the restart replayed the same message): the DLQ takes it instead.
        largest = max((DefaultRecordBatchBuilder.estimate_size_in_bytes(*r) for r in records), default=0)
        if largest > self._max_forward_bytes:
            self._dlq.inc()
            self._dead_letters.send(tp, message, "too_large_to_forward", f"a forward of {largest} bytes "
                                    f"with its headers, over {self._max_forward_bytes}")
            return
        self._accepted.inc()
        self.progress.read(tp, received)  # events only: a record that is not one moves nothing
        held = _Held(("forward", tp, offset), len(records))
        self._offsets.hold(tp, offset, held.token)
        self._queued += [(key, value, headers, held) for key, value, headers in records]

    async def flush(self) -> None:
        """Hand the forwards queued since the last flush to the producer, in one batch per repartition
        partition (more when one fills): at the end of each turn, before the watermarks, which must follow
        the forwards on each partition. Only the loop calls it (see the module doc)."""
        if not self._queued:
            return
        queued, self._queued = self._queued, []  # before any await: nothing is taken twice
        partitions = await self._sink.partitions(self._repartition_topic)  # as they stand now
        by_partition: dict[int, list[_Forward]] = {}
        for forward in queued:
            by_partition.setdefault(partition_by_key(forward[0], *partitions), []).append(forward)
        for partition, forwards in by_partition.items():
            sent = 0
            while sent < len(forwards):
                if partition not in self._sink.known_partitions(self._repartition_topic):
                    # The topic was recreated smaller while a send waited: the rest is partitioned anew at
                    # the next flush, and no watermark passes it meanwhile (`send_marks`).
                    self._queued += forwards[sent:]
                    break
                batch = self._sink.batch()
                count = 0  # a first record always fits, so every batch takes one at least
                for key, value, headers, _ in forwards[sent:]:
                    if batch.append(key=key, value=value, timestamp=None, headers=headers) is None:  # full
                        break
                    count += 1
                await self._send(batch, partition, [forward[3] for forward in forwards[sent:sent + count]])
                sent += count

    async def _send(self, batch: Any, partition: int, held: list[_Held]) -> None:
        """Send one filled batch; each message of `held` (one entry per forward in it) is released once the
        batches of all its forwards are acknowledged."""
        count = len(held)
        batch.close()  # whole: sent without lingering, and no later record (a watermark) joins it
        ack = await self._sink.send_batch(batch, self._repartition_topic, partition)

        def acknowledged(ack: asyncio.Future[Any]) -> None:
            if ack.cancelled() or ack.exception() is not None:
                return  # its messages stay held; `check` raises the error
            metadata = ack.result()  # the batch's first record
            written, last = (metadata.topic, metadata.partition), metadata.offset + count - 1
            if last > self.forwarded.get(written, -1):
                self.forwarded[written] = last
            for message in held:
                message.waiting -= 1
                if not message.waiting:
                    self._offsets.release(message.token)

        ack.add_done_callback(acknowledged)
        self._acks.append(ack)
        self._forwarded.inc(count)

    def _read(self, tp: PartitionKey, message: Any) -> Keyed | None:
        """The records of one input message grouped by burst key, each group with its bytes; None once it
        went to the DLQ."""
        self._stats.events_in += 1
        offset: int = message.offset
        self._offsets.received(tp, offset)
        raw: bytes = message.value if message.value is not None else b""
        received = broker_time(message)
        try:
            sightings = self._reader.read_sightings(raw, received_at=received)
            if len(sightings) == 1:  # the usual message: one group, the message itself (~0.6 µs less)
                return Keyed([(KeyedGroup(((0, sightings[0]),)), raw)], received)
            groups = group_sightings(sightings)
            values = forwarded_values(raw, groups)
        except BadInput as bad:
            self._dlq.inc()
            self._dead_letters.send(tp, message, bad.reason, str(bad))
            return None
        except Exception as error:  # a decoder bug must not crash-loop the service on one message
            log.exception("decoding failed unexpectedly",
                          extra=log_fields(topic=tp[0], partition=tp[1], offset=offset))
            self._dlq.inc()
            self._dead_letters.send(tp, message, "internal_error", type(error).__name__)
            return None
        return Keyed(list(zip(groups, values, strict=True)), received)

    async def send_marks(self, input_topic: str, owned: Collection[PartitionKey],
                         caught_up: Callable[[PartitionKey], bool]) -> None:
        """Send the watermarks of the `owned` input partitions to every repartition partition, when due;
        `caught_up` says which are read to their end now (for windows that predate end times)."""
        now = self._clock()
        if not self._forward or now - self._last_mark < self._mark_every_s or self._queued:
            return  # not due, or forwards wait for the next flush: a mark must not pass them
        tps = [tp for tp in owned if tp[0] == input_topic]
        marks = self.progress.marks(tps)
        if not marks:
            return  # nothing known yet (no fetch seen the end): asked again next turn
        self._last_mark = now
        headers = watermark_record(input_topic, marks, {tp[1] for tp in tps if caught_up(tp)})
        for partition in sorted(self._sink.known_partitions(self._repartition_topic)):
            # Behind this stage's forwards on each partition: a window that reads the mark has read them.
            mark = await self._sink.enqueue(self._repartition_topic, None, b"", headers, partition)
            mark.add_done_callback(_mark_sent)

    async def clear_the_way(self, input_topic: str) -> None:
        """After the repartition topic was recreated (the broker lost its state), send an empty watermark
        record to each partition until one is taken (10 s at most in all). tansu keeps what was sent to the
        topic while it was gone (marks go out idle too), and refuses as many batches once the topic is
        created again: marks take those refusals, not forwards (whose failure takes the service down)."""
        headers = watermark_record(input_topic, {}, ())
        deadline = time.monotonic() + SETTLE_WAIT_S
        for partition in sorted(self._sink.known_partitions(self._repartition_topic)):
            while time.monotonic() < deadline:
                mark = await self._sink.enqueue(self._repartition_topic, None, b"", headers, partition)
                done, _ = await asyncio.wait([mark], timeout=max(0.0, deadline - time.monotonic()))
                if not done or (not mark.cancelled() and mark.exception() is None):
                    break

    def check(self) -> None:
        """Drop acknowledged forwards; re-raise the error of one that failed (the service must go down:
        its message stays uncommitted and is replayed); count what `key` accepted since the last check."""
        if self._keyed:
            self._accepted.inc(self._keyed)  # once per turn: an update takes a lock (~0.3 µs)
            self._keyed = 0
        # Every batch, not only up to the first pending one: a failure behind a slow batch must stop the
        # loop now, before a watermark covers the message whose forward it lost.
        waiting: list[asyncio.Future[Any]] = []
        for ack in self._acks:
            if not ack.done():
                waiting.append(ack)
            elif not ack.cancelled() and (error := ack.exception()) is not None:  # cancelled: its offset stays held
                raise error
        self._acks = waiting

    async def settle(self, timeout_s: float | None = None) -> None:
        """Wait until every batch of forwards handed to the producer so far and every DLQ copy is
        acknowledged (before a revoke's commit, and at shutdown after a `flush`), for `timeout_s` at most in
        all; a forward that failed re-raises its error. Forwards still queued keep their offsets held."""
        timeout_s = SETTLE_WAIT_S if timeout_s is None else timeout_s  # read at each call (a test shortens it)
        deadline = time.monotonic() + timeout_s
        await _settle(list(self._acks), timeout_s)  # those a flush hands over meanwhile: `check` sees them
        self._acks = _unsettled(self._acks)
        await self._dead_letters.settle(max(0.0, deadline - time.monotonic()))


def _mark_sent(mark: asyncio.Future[Any]) -> None:
    """A watermark record that failed (the broker restarting, the topic recreated) is not work lost: the
    next one says as much, and no offset waits for it. So it never takes the service down."""
    if not mark.cancelled() and (error := mark.exception()) is not None:
        log.debug("watermark record not sent", extra=log_fields(error=type(error).__name__))


async def _settle(waiting: list[_F], timeout_s: float) -> None:
    """Wait up to `timeout_s` for `waiting`; those still pending keep their offsets held. The error of one
    that failed is raised; one cancelled (its producer stopped) stays unacknowledged."""
    if not waiting:
        return
    await asyncio.wait(waiting, timeout=timeout_s)
    for future in waiting:
        if future.done() and not future.cancelled() and (error := future.exception()) is not None:
            raise error
    pending = sum(not future.done() for future in waiting)
    if pending:
        log.warning("records not acknowledged in time; their offsets stay uncommitted",
                    extra=log_fields(pending=pending, waited_s=timeout_s))


def _unsettled(futures: list[_F]) -> list[_F]:
    """Those still to watch: pending, or failed (their error is raised at the next `check` or settle,
    whichever call added them while another waited). Settled (acknowledged, or cancelled) ones go."""
    return [future for future in futures
            if not future.done() or (not future.cancelled() and future.exception() is not None)]
