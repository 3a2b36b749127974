"""One sink's consumer of the analyses topic: read, route, rate-limit, deliver with retries, commit.

Each sink reads in a consumer group of its own (`<notify group>-<sink>`), so a sink that is down holds
back only its own offsets while the others go on. An offset is committed once its analysis was delivered,
found already delivered, skipped by the route, or given up and written to the DLQ with the reason. A
retry or rate-limit wait keeps polling with the partitions paused, so the group does not drop a member
that waits longer than `max.poll.interval.ms`; a rebalance or shutdown interrupts the wait, and the
analysis stays uncommitted for whoever owns the partition next.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from analysis.intake.redact import Redactor, redact_value
from consumer.kafka import (
    EventSink,
    RebalanceHooks,
    commit_offsets,
    dlq_copy,
    dlq_headers,
    make_consumer,
    measure_lag,
    poll,
    start_with_retry,
    stop_clients,
)
from consumer.logs import log_fields
from consumer.notify.metrics import NotifyMetrics
from consumer.notify.notice import BadNotice, Notice, read_event
from consumer.notify.routing import RateLimiter, refusal
from consumer.notify.transport import DeliveryError, Outcome
from consumer.notify_settings import NotifySettings, NotifySinkSettings
from consumer.retry import Backoff, sleep_unless
from consumer.settings import KafkaSettings

__all__ = ["Sink", "SinkLane"]

log = logging.getLogger("logagent.notify")

_POLL_MS = 200
_KEEPALIVE_S = 1.0
_LAG_INTERVAL_S = 5.0
_ERROR_CHARS = 512
_REVOKE_WAIT_S = 15.0


class Sink(Protocol):
    """Where analyses go. `deliver` raises DeliveryError, and must be safe to call again after one."""

    name: str

    async def deliver(self, notice: Notice, raw: bytes) -> Outcome:
        """Send one analysis; `raw` is the event exactly as it was read."""


@dataclass
class LaneStats:
    """What one lane did since it started, by outcome."""

    outcomes: dict[str, int] = field(default_factory=dict)

    def add(self, outcome: Outcome) -> None:
        """Count one outcome."""
        self.outcomes[outcome.value] = self.outcomes.get(outcome.value, 0) + 1


class SinkLane:
    """Reads the analyses topic for one sink and delivers each analysis the sink's route takes."""

    def __init__(self, sink: Sink, route: NotifySinkSettings, kafka: KafkaSettings, notify: NotifySettings,
                 dlq: EventSink, metrics: NotifyMetrics, redactor: Redactor) -> None:
        self.sink = sink
        self._redactor = redactor
        self._route = route
        self._kafka = kafka
        self._dlq = dlq
        self._dlq_topic = notify.dlq_topic
        self._metrics = metrics
        self._backoff = Backoff(notify.retry_initial_s, notify.retry_max_s, notify.retry_attempts)
        self._retry_after_max_s = notify.retry_after_max_s
        self._limiter = RateLimiter(route.rate_per_minute, route.rate_burst)
        self._consumer: AIOKafkaConsumer | None = None
        self._stop = asyncio.Event()
        self._generation = 0  # bumped by every revoke: a batch read before it is abandoned
        self._abandoned: dict[TopicPartition, int] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._next_lag = 0.0
        self.started = False
        self.stats = LaneStats()
        metrics.prepare(sink.name)

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until `stop` is set; the analysis in hand is finished or left uncommitted."""
        self._stop = stop
        consumer = make_consumer(self._kafka, RebalanceHooks(self._on_revoked, self._on_assigned))
        if not await self._start(consumer):
            return
        self._consumer = consumer
        self.started = True
        try:
            while not stop.is_set():
                batch = await poll(consumer, _POLL_MS)
                if batch:
                    await self._handle_batch(consumer, batch)
                await self._measure_lag(consumer)
        finally:
            self.started = False
            await stop_clients(consumer)

    async def _start(self, consumer: AIOKafkaConsumer) -> bool:
        return await start_with_retry(consumer, self._stop, self._backoff, f"{self.sink.name} consumer")

    # --- one batch, one analysis ---------------------------------------------------------------------

    async def _handle_batch(self, consumer: AIOKafkaConsumer, batch: Mapping[TopicPartition, list[Any]]) -> None:
        generation = self._generation
        consumer.pause(*consumer.assignment())  # waits inside a delivery poll to stay in the group: fetch nothing
        try:
            for tp, messages in batch.items():
                for message in messages:
                    if self._stop.is_set() or generation != self._generation:
                        self._abandon(consumer, tp, message.offset)
                        break
                    self._idle.clear()
                    try:
                        handled = await self._handle(tp, message, generation)
                        if handled:
                            await self._commit(consumer, tp, message.offset + 1)
                    finally:
                        self._idle.set()
                    if not handled:
                        self._abandon(consumer, tp, message.offset)
                        break
        finally:
            # Everything paused here or during a wait (partitions a rebalance brought in) reads on.
            consumer.resume(*(set(consumer.paused()) & set(consumer.assignment())))

    def _abandon(self, consumer: AIOKafkaConsumer, tp: TopicPartition, offset: int) -> None:
        """Read `tp` again from `offset`: now if it is still ours, else when it comes back."""
        self._abandoned.setdefault(tp, offset)
        if tp in consumer.assignment():
            consumer.seek(tp, offset)

    async def _handle(self, tp: TopicPartition, message: Any, generation: int) -> bool:
        """Deliver one record; False when a shutdown or rebalance interrupted it (left uncommitted)."""
        started = time.monotonic()
        try:
            # The analysing service redacted the event; redacting again here guards what leaves to third
            # parties against any producer that did not (a no-op, byte for byte, on a clean event).
            notice, raw = read_event(message.value, partial(redact_value, redactor=self._redactor))
        except BadNotice as bad:
            await self._dead_letter(tp, message, bad.reason, str(bad))
            self._count(Outcome.FAILED, started)
            return True
        if notice is None:
            self._count(Outcome.SKIPPED, started)
            return True
        why = refusal(self._route, notice)
        if why is not None:
            log.debug("analysis not routed", extra=log_fields(sink=self.sink.name, analysis_id=notice.analysis_id,
                                                               refused_by=why))
            self._count(Outcome.SKIPPED, started)
            return True
        while (wait := self._limiter.wait_s()) > 0:
            if await self._wait(wait, generation):
                return False
        outcome = await self._deliver(tp, message, notice, raw, generation)
        if outcome is None:
            return False
        self._count(outcome, started)
        log.info("notification handled", extra=log_fields(
            sink=self.sink.name, analysis_id=notice.analysis_id, server=notice.server, outcome=outcome.value,
            seconds=round(time.monotonic() - started, 3)))
        return True

    async def _deliver(self, tp: TopicPartition, message: Any, notice: Notice, raw: bytes,
                       generation: int) -> Outcome | None:
        """The sink's answer after retries; None when interrupted. Given-up deliveries go to the DLQ."""
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self.sink.deliver(notice, raw)
            except DeliveryError as error:
                if error.retriable and attempt < self._backoff.attempts:
                    delay = max(self._backoff.delay(attempt), min(error.retry_after or 0.0, self._retry_after_max_s))
                    self._metrics.retries.labels(self.sink.name, error.reason).inc()
                    log.warning("delivery failed, retrying", extra=log_fields(
                        sink=self.sink.name, analysis_id=notice.analysis_id, reason=error.reason, attempt=attempt,
                        delay_s=round(delay, 2), error=str(error)[:_ERROR_CHARS]))
                    if await self._wait(delay, generation):
                        return None
                    continue
                reason = error.reason if not error.retriable else "retries_exhausted"
                log.error("delivery given up", extra=log_fields(
                    sink=self.sink.name, analysis_id=notice.analysis_id, reason=reason, attempts=attempt,
                    error=str(error)[:_ERROR_CHARS]))
                await self._dead_letter(tp, message, reason, str(error), attempts=attempt)
                return Outcome.FAILED
            except Exception as error:  # a sink's bug on one analysis must not stop every later one
                log.exception("delivery failed unexpectedly", extra=log_fields(
                    sink=self.sink.name, analysis_id=notice.analysis_id))
                await self._dead_letter(tp, message, "internal_error", type(error).__name__, attempts=attempt)
                return Outcome.FAILED

    async def _dead_letter(self, tp: TopicPartition, message: Any, reason: str, error: str, attempts: int = 0) -> None:
        """The original record to the notify DLQ, with why, which sink and where it came from."""
        headers = dlq_headers(reason, (tp.topic, tp.partition), message.offset, self._redactor.redact(error),
                              _ERROR_CHARS)
        headers += [("sink", self.sink.name.encode()), ("attempts", str(attempts).encode())]
        key, value, headers = dlq_copy(message.key, message.value or b"", headers, self._kafka.dlq_max_value_bytes)
        await self._dlq.publish(self._dlq_topic, key, value, headers)
        self._metrics.dlq.labels(self.sink.name, reason).inc()

    def _count(self, outcome: Outcome, started: float) -> None:
        self.stats.add(outcome)
        self._metrics.deliveries.labels(self.sink.name, outcome.value).inc()
        self._metrics.delivery_seconds.labels(self.sink.name).observe(time.monotonic() - started)

    # --- waiting without leaving the group -----------------------------------------------------------

    async def _wait(self, seconds: float, generation: int) -> bool:
        """Wait `seconds` while polling the paused partitions; True when a shutdown or rebalance came first."""
        consumer = self._consumer
        deadline = time.monotonic() + seconds
        while not (self._stop.is_set() or generation != self._generation):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if consumer is None:
                await sleep_unless(self._stop, left)
                continue
            slice_s = min(left, _KEEPALIVE_S)
            fetched = await poll(consumer, int(slice_s * 1000))
            # Only partitions assigned during the wait can return records: read them again later.
            for tp, records in fetched.items():
                consumer.seek(tp, records[0].offset)
                consumer.pause(tp)
            if not fetched:
                await sleep_unless(self._stop, max(0.0, min(slice_s, deadline - time.monotonic())) / 10)
        return True

    # --- offsets and rebalance -----------------------------------------------------------------------

    async def _commit(self, consumer: AIOKafkaConsumer, tp: TopicPartition, offset: int) -> None:
        try:
            await commit_offsets(consumer, {tp: offset})
        except KafkaError as error:
            # The partition moved in a rebalance: its next owner replays from the last commit (at least once).
            log.warning("notify offset commit failed", extra=log_fields(sink=self.sink.name,
                                                                        error=type(error).__name__))

    async def _on_revoked(self, revoked: Collection[Any]) -> None:
        self._generation += 1
        # The next owner must not deliver what we still deliver (two replicas would open the same issue):
        # the analysis in hand stops at its next wait, or finishes its request, before we let go.
        try:
            await asyncio.wait_for(self._idle.wait(), timeout=_REVOKE_WAIT_S)
        except TimeoutError:
            log.warning("a delivery outlived the rebalance", extra=log_fields(sink=self.sink.name))

    async def _on_assigned(self, assigned: Collection[Any]) -> None:
        # aiokafka keeps the position of a partition that comes straight back, past what was abandoned.
        consumer = self._consumer
        for tp in assigned:
            offset = self._abandoned.pop(tp, None)
            if offset is not None and consumer is not None:
                consumer.seek(tp, offset)
        self._abandoned.clear()

    async def _measure_lag(self, consumer: AIOKafkaConsumer) -> None:
        if time.monotonic() < self._next_lag:
            return
        self._next_lag = time.monotonic() + _LAG_INTERVAL_S
        for (_, partition), lag in (await measure_lag(consumer, consumer.assignment())).items():
            if lag is not None:
                self._metrics.consumer_lag.labels(self.sink.name, str(partition)).set(max(lag, 0))
