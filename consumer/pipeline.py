"""The service: key each error, count it in its burst's window, analyse each burst once, publish, commit.

Two stages run in every replica, on one consumer in one group (as Kafka Streams runs its repartition
topics): the key stage (`consumer.key_stage`) reads the input topic and forwards each message to the
repartition topic keyed by (server, fingerprint); the window stage (`consumer.window_stage`) reads that
topic, so every event of a burst reaches one replica in order, however the input was partitioned. With
`input.keyed_by_server` the input goes straight to the window. Closed bursts go to `consumer.workers`,
whose `max_inflight` workers analyse, publish and release them. Offsets are committed only up to the
lowest one unfinished work still holds (an unacknowledged forward or DLQ copy on the input, an
unpublished burst on the repartition topic), so a crash replays exactly the work that was not finished.
When the queue is full, fetching pauses instead of buffering.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Collection
from contextlib import AsyncExitStack
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError

from analysis.intake.decode import DecodeConfig
from analysis.intake.redact import Redactor, redact_id
from consumer.analyzer import Analyzer
from consumer.http import HealthState
from consumer.kafka import (
    EventSink,
    RebalanceHooks,
    as_topic_partition,
    commit_offsets,
    committed_offsets,
    ensure_repartition_topic,
    fetched_at,
    forward_max_bytes,
    make_consumer,
    make_forward_producer,
    make_producer,
    measure_lag,
    poll,
    require_input_topic,
    start_client,
    stop_clients,
    watch_broker,
)
from consumer.key_stage import SETTLE_WAIT_S, DeadLetters, KeyStage
from consumer.keying import KeyReader
from consumer.logs import log_event, log_fields
from consumer.metrics import Metrics
from consumer.offsets import OffsetTracker
from consumer.settings import Settings
from consumer.window import ClosedBurst, PartitionKey
from consumer.window_stage import WindowStage, sample_builder
from consumer.workers import AnalysisWorkers, ServiceStats

__all__ = ["Analyzer", "Service", "ServiceStats"]

log = logging.getLogger(__name__)

# Expiry scans every open burst, so it runs a few times a second rather than after every batch.
_EXPIRE_INTERVAL_S = 0.1


class Service:
    """The running pipeline. `run(stop)` returns once `stop` is set and the shutdown is done."""

    def __init__(
        self,
        settings: Settings,
        analyzer: Analyzer,
        metrics: Metrics,
        health: HealthState | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._analyzer = analyzer
        self._metrics = metrics
        self._health = health
        self._clock = clock
        self._forward = not settings.input.keyed_by_server
        self._repartition_topic = settings.repartition.topic_for(settings.kafka.group_id)
        self._offsets = OffsetTracker()
        self.stats = ServiceStats()
        self._workers = AnalysisWorkers(settings, analyzer, metrics, self._offsets, self.stats)
        self._paused = False
        self._assigned: set[PartitionKey] = set()
        self._read_from_start: set[PartitionKey] = set()
        self._lag: dict[PartitionKey, int | None] = {}
        self._group_committed: dict[PartitionKey, int | None] = {}
        self._consumer: AIOKafkaConsumer | None = None
        decode_config = DecodeConfig(
            max_message_bytes=settings.input.max_message_bytes,
            max_depth=settings.input.max_depth,
            commit_field=settings.input.commit_field,
            in_app_prefixes=tuple(settings.input.in_app_prefixes),
            server_id_fields=tuple(settings.input.server_id_fields),
            tenant=settings.input.tenant,
        )
        redactor = Redactor(settings.redaction)
        self._reader = KeyReader(decode_config, redactor)
        self._dead_letters = DeadLetters(settings.kafka, self._offsets, metrics, self.stats, redactor.redact)
        self._window_stage = WindowStage(settings.window, sample_builder(decode_config, redactor), self._enqueue,
                                         self._offsets, self._dead_letters, self.stats, settings.kafka.input_topic,
                                         clock=clock, tenant=redact_id(settings.input.tenant, redactor))
        self._window = self._window_stage.window
        self._key_stage: KeyStage | None = None

    def _read_to_end(self) -> bool:
        """Every assigned partition read to its end, as of the last fetch."""
        return bool(self._assigned) and all(self._lag.get(tp) == 0 for tp in self._assigned)

    def _read_through(self, tp: PartitionKey) -> bool:
        """`tp` read to its end as of the last fetch, and not paused: once every partition is, idleness in
        wall time counts as quiet (`consumer.watermark`). A forward still in flight is not a backlog: under
        a steady stream one always is, and waiting for none would keep every quiet burst open until its
        length cap."""
        return self._lag.get(tp) == 0 and not (self._paused and tp[0] == self._window_topic())

    def _caught_up(self) -> bool:
        """Read to the end, including what this replica forwarded to repartition partitions it owns itself
        (the last fetch may predate those)."""
        if not self._read_to_end():
            return False
        if self._key_stage is None:
            return True
        read = self._window_stage.read
        return all(read.get(tp, -1) >= offset for tp, offset in self._key_stage.forwarded.items()
                   if tp in self._assigned)

    @property
    def assigned(self) -> frozenset[PartitionKey]:
        """The partitions (input and repartition) this replica owns now."""
        return frozenset(self._assigned)

    def idle(self) -> bool:
        """Caught up with every assigned partition, with no open burst and no queued or running analysis."""
        return (
            self._caught_up()
            and self._window.open_count == 0
            and self._workers.idle
            and self._offsets.held_count == 0
            and (self._key_stage is None or self._key_stage.pending == 0)
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until `stop` is set; then finish running analyses (bounded), commit what is safe, close."""
        kafka = self._settings.kafka
        async with AsyncExitStack() as stack:
            producer = make_producer(kafka)
            await start_client(producer, kafka)
            clients: list[AIOKafkaConsumer | AIOKafkaProducer] = [producer]  # stopped together, capped
            stack.push_async_callback(lambda: stop_clients(*clients))
            sink = EventSink(producer)
            self._dead_letters.start(sink)
            topics = [kafka.input_topic]
            forward_sink = sink
            if not self._forward:
                await require_input_topic(kafka)
            else:
                max_bytes = self._settings.input.max_message_bytes
                await ensure_repartition_topic(kafka, self._settings.repartition, max_bytes)
                topics.append(self._repartition_topic)
                forwarder = make_forward_producer(kafka, self._settings.repartition, max_bytes)
                await start_client(forwarder, kafka)
                clients.append(forwarder)
                forward_sink = EventSink(forwarder)
            self._key_stage = KeyStage(self._repartition_topic, self._reader, forward_sink, self._offsets,
                                       self._dead_letters, self._metrics, self.stats, forward=self._forward,
                                       clock=self._clock,
                                       mark_every_s=self._settings.repartition.watermark_interval_ms / 1000,
                                       max_forward_bytes=forward_max_bytes(self._settings.input.max_message_bytes))
            consumer = make_consumer(kafka, RebalanceHooks(self._on_revoked, self._on_assigned), topics)
            await start_client(consumer, kafka)
            clients.append(consumer)
            self._consumer = consumer
            if self._health is not None:
                self._health.broker_answered()
                readiness = self._settings.readiness
                watch = asyncio.create_task(
                    watch_broker(consumer, self._health.broker_answered, readiness.broker_probe_s, stop))
                stack.push_async_callback(_cancel, watch)
            self._workers.start(sink, stop)
            try:
                await self._consume(consumer, self._key_stage, stop)
            finally:
                if self._health is not None:
                    self._health.loop_stopped()
                await self._finish()
                await self._commit()
                if self._health is not None:
                    self._health.set_partitions(0)

    # --- the main loop -------------------------------------------------------------------------------

    async def _consume(self, consumer: AIOKafkaConsumer, key_stage: KeyStage, stop: asyncio.Event) -> None:
        pipeline = self._settings.pipeline
        next_commit = self._clock() + self._settings.kafka.commit_interval_s
        next_expire = self._clock()
        window_stage = self._window_stage
        while not stop.is_set():
            if self._health is not None:
                self._health.beat()  # /livez fails when this stops for http.stall_after_s
            batch = await poll(consumer, pipeline.poll_timeout_ms)
            # Each message costs at most ~1 s of CPU per MiB (every rule is linear); a turn stops after
            # max_turn_s all the same (after one message at least, so a turn always moves on), or at once on
            # SIGTERM, and what it did not read is fetched again.
            turn_ends = time.monotonic() + pipeline.max_turn_s
            read = 0
            for tp, messages in batch.items():
                if tp.topic == self._repartition_topic and self._forward:
                    for message in messages:  # counting is cheap, but a record may close a burst
                        if read and (time.monotonic() > turn_ends or stop.is_set()):
                            consumer.seek(as_topic_partition(tp), message.offset)
                            break
                        read += window_stage.ingest(tp, message)
                    continue
                for message in messages:
                    if read and (time.monotonic() > turn_ends or stop.is_set()):
                        consumer.seek(as_topic_partition(tp), message.offset)
                        break
                    read += 1
                    if self._forward:
                        key_stage.ingest(tp, message)
                    elif (keyed := key_stage.key(tp, message)) is not None:  # this window owns its bursts
                        window_stage.count_keyed(keyed, (tp, message.offset))
            await key_stage.flush()
            key_stage.check()
            await self._dead_letters.settle()
            await self._measure_lag(consumer)
            input_topic = self._settings.kafka.input_topic
            await key_stage.send_marks(input_topic, self._assigned, self._read_through)
            if self._clock() >= next_expire:
                # Closing builds samples (decoding them): it too stops at the turn's length.
                window_stage.expire(self._clock(), self._read_through, consumer.partitions_for_topic(input_topic),
                                    time.monotonic() + pipeline.max_turn_s)
                next_expire = self._clock() + _EXPIRE_INTERVAL_S
            self._apply_backpressure(consumer)
            self._metrics.open_bursts.set(self._window.open_count)
            self._workers.check()
            if self._clock() >= next_commit:
                await self._commit()
                next_commit = self._clock() + self._settings.kafka.commit_interval_s

    def _enqueue(self, closed: ClosedBurst) -> None:
        self._workers.put(closed)

    def _apply_backpressure(self, consumer: AIOKafkaConsumer) -> None:
        """Pause the window stage's partitions while the analysis queue is full. The key stage reads on:
        what it forwards waits in Kafka, and much of it is for other replicas' windows."""
        pipeline = self._settings.pipeline
        depth = self._workers.depth
        if not self._paused and depth >= pipeline.queue_size:
            self._paused = True
            consumer.pause(*self._window_partitions(consumer.assignment()))
            self.stats.pauses += 1
            self._metrics.paused.set(1)
            log.info("fetching paused", extra=log_fields(queued=depth))
        elif self._paused and depth <= pipeline.resume_at:
            self._paused = False
            consumer.resume(*self._window_partitions(consumer.assignment()))
            self._metrics.paused.set(0)
            log.info("fetching resumed", extra=log_fields(queued=depth))

    def _window_partitions(self, tps: Collection[Any]) -> list[Any]:
        """The partitions the window stage reads: the repartition topic's, or the input's when keyed."""
        topic = self._window_topic()
        return [tp for tp in tps if tp.topic == topic]

    def _window_topic(self) -> str:
        return self._repartition_topic if self._forward else self._settings.kafka.input_topic

    async def _measure_lag(self, consumer: AIOKafkaConsumer) -> None:
        # When each input partition was last fetched, read before its end offset: that end is then from
        # this fetch or a later one (`Progress.fetched` bounds when the broker saw it).
        input_topic = self._settings.kafka.input_topic
        polled = {tp: fetched_at(consumer, tp) for tp in self._assigned if tp[0] == input_topic}
        self._lag = await measure_lag(consumer, self._assigned)
        group = self._settings.kafka.group_id
        for tp, lag in self._lag.items():
            if lag is not None and lag < 0:
                # The log is shorter than our position: the topic was recreated (a broker without
                # persistent storage restarted) or truncated. Brokers that do not answer "out of range"
                # would leave us waiting past its end, so start over as auto_offset_reset=earliest would.
                log.warning("partition log reset, reading it from the beginning",
                            extra=log_fields(topic=tp[0], partition=tp[1]))
                self._offsets.forget_partitions([tp])
                # What the open bursts counted of it is read again: drop it first, or it counts twice (a
                # broker that serves records past the end it reports resets a partition again and again).
                self._window_stage.revoke([tp])
                self._window_stage.forget_replays()
                await consumer.seek_to_beginning(as_topic_partition(tp))
                self._lag[tp] = None
            elif lag is not None:
                self._metrics.position_lag.labels(group, tp[0], str(tp[1])).set(lag)
        if self._key_stage is not None:
            for tp, polled_at in polled.items():
                self._key_stage.progress.fetched(tp, polled_at, self._lag.get(tp) == 0)
        self._show_committed_lag(self._assigned)

    def _show_committed_lag(self, tps: Collection[PartitionKey]) -> None:
        """`logagent_consumer_lag`: end offset minus the group's committed offset, as kafka-exporter and
        Burrow compute it; it trails the position lag by what open bursts hold back."""
        if self._consumer is None:
            return
        group = self._settings.kafka.group_id
        for tp in tps:
            highwater = self._consumer.highwater(as_topic_partition(tp))
            committed = self._committed_offset(tp)
            if highwater is not None and committed is not None:
                self._metrics.consumer_lag.labels(group, tp[0], str(tp[1])).set(max(0, int(highwater) - committed))

    def _committed_offset(self, tp: PartitionKey) -> int | None:
        """The group's committed offset: ours since we own the partition, else what the broker had."""
        ours = self._offsets.last_committed(tp)
        return ours if ours is not None else self._group_committed.get(tp)

    async def _commit(self, only: Collection[PartitionKey] | None = None) -> None:
        """Commit the safe offsets of the assigned partitions (or of `only`) that moved."""
        if self._consumer is None:
            return
        scope = self._assigned if only is None else set(only) & self._assigned
        consumer = self._consumer
        offsets = {
            tp: _not_past_end(offset, consumer.highwater(as_topic_partition(tp)))
            for tp, offset in self._offsets.to_commit(self._window.held_offsets()).items()
            if tp in scope
        }
        if not offsets:
            return
        try:
            await commit_offsets(self._consumer, {as_topic_partition(tp): offset for tp, offset in offsets.items()})
        except KafkaError as error:
            # A commit lost to a rebalance is retried by the next owner's replay; nothing is lost.
            log.warning("offset commit failed", extra=log_fields(error=type(error).__name__))
            return
        self._offsets.committed(offsets)
        self._metrics.last_commit.set_to_current_time()
        self._show_committed_lag(offsets)

    # --- rebalance -------------------------------------------------------------------------------

    async def _on_revoked(self, revoked: Collection[Any]) -> None:
        gone = {(tp.topic, tp.partition) for tp in revoked}
        settled = True
        if self._key_stage is not None:
            try:
                await self._key_stage.settle()  # forwards acknowledged: the input may commit past them
            except Exception as error:  # raised, aiokafka would only log it and skip the bookkeeping below
                # A forward or DLQ copy failed: it stays in view, and the loop's next check raises it and stops
                # the service. Commit nothing here; forget the partitions all the same.
                settled = False
                log.warning("a send failed before the revoke; nothing of the revoked partitions is committed",
                            extra=log_fields(error=type(error).__name__))
            self._key_stage.progress.forget(gone)
        if settled and await self._broker_lost_commits(revoked):
            # Our old offsets would point into logs that no longer exist: commit nothing, start over.
            log.warning("the broker lost this group's offsets; reading the partitions from their start")
            self._read_from_start |= gone
            self._window_stage.forget_replays()
            if self._forward and self._key_stage is not None:  # the repartition topic went with the rest
                await ensure_repartition_topic(self._settings.kafka, self._settings.repartition,
                                               self._settings.input.max_message_bytes)
                await self._key_stage.clear_the_way(self._settings.kafka.input_topic)
        elif settled:
            await self._commit(only=gone)
        self._window_stage.revoke(gone)
        self._offsets.forget_partitions(gone)
        self._assigned -= gone
        self._forget_lag(gone)
        log.info("partitions revoked", extra=log_event(
            "partitions-revoked", partitions=_names(gone), owned=len(self._assigned)))
        if self._health is not None:
            self._health.set_partitions(len(self._assigned))

    def _forget_lag(self, gone: Collection[PartitionKey]) -> None:
        """Drop the lag series of partitions this replica no longer owns: their new owner reports them."""
        group = self._settings.kafka.group_id
        for topic, partition in gone:
            self._group_committed.pop((topic, partition), None)
            for gauge in (self._metrics.consumer_lag, self._metrics.position_lag):
                with contextlib.suppress(KeyError):  # never measured here
                    gauge.remove(group, topic, str(partition))

    async def _broker_lost_commits(self, partitions: Collection[Any]) -> bool:
        """True when the broker has no offset for a partition this consumer committed before: it lost its
        state (a broker on memory storage restarted, topics recreated)."""
        if self._consumer is None:
            return False
        ours = [tp for tp in partitions if self._offsets.last_committed((tp.topic, tp.partition)) is not None]
        # One not fetched in time is unknown: the normal path holds, a replay covers a failed commit.
        return None in (await committed_offsets(self._consumer, ours)).values()

    async def _on_assigned(self, assigned: Collection[Any]) -> None:
        new = {as_topic_partition(tp) for tp in assigned} - self._assigned
        self._assigned |= new
        if self._consumer is not None:
            committed = await committed_offsets(self._consumer, new)
            for tp in new:  # one not fetched in time is unknown until our first commit there
                self._group_committed[(tp.topic, tp.partition)] = committed.get(tp)
        restart = [tp for tp in assigned if (tp.topic, tp.partition) in self._read_from_start]
        if restart and self._consumer is not None:
            # aiokafka keeps the fetch position of a partition that comes straight back; it is stale here.
            await self._consumer.seek_to_beginning(*restart)
            self._read_from_start -= {(tp.topic, tp.partition) for tp in restart}
        if self._paused and self._consumer is not None:
            self._consumer.pause(*self._window_partitions(assigned))
        log.info("partitions assigned", extra=log_event(
            "partitions-assigned", partitions=_names(new), owned=len(self._assigned)))
        if self._health is not None:
            self._health.set_partitions(len(self._assigned))

    async def _finish(self) -> None:
        """Let running analyses finish within the grace period; the rest is handed back uncommitted."""
        handed_back = await self._workers.finish()
        if self._key_stage is not None:
            try:  # forwards a failed turn or a recreated topic left queued; bounded, as the settle is
                await asyncio.wait_for(self._key_stage.flush(), SETTLE_WAIT_S)
            except TimeoutError:  # nothing is sent twice: the process stops, their offsets stay held
                log.warning("forwards not handed over in time; their offsets stay uncommitted",
                            extra=log_fields(waited_s=SETTLE_WAIT_S))
            await self._key_stage.settle()
        log.info("stopped", extra=log_fields(open_bursts=self._window.open_count, handed_back=handed_back))


def _names(tps: Collection[PartitionKey]) -> list[str]:
    return sorted(f"{topic}/{partition}" for topic, partition in tps)


async def _cancel(task: asyncio.Task[None]) -> None:
    """Cancel `task` and wait for it; a cancellation of the caller itself (Ctrl-C) still propagates,
    where suppressing CancelledError around `await task` would swallow it."""
    task.cancel()
    await asyncio.wait({task})


def _not_past_end(offset: int, end: int | None) -> int:
    """Never commit past the log end the broker last reported: a broker that serves records beyond it (tansu,
    a topic recreated) would leave the group's offset there, and every later start would reset and replay."""
    return offset if end is None else min(offset, end)
