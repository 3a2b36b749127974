"""The publishing half of the pipeline: closed bursts in, analysis events out.

`max_inflight` workers take closed bursts from a queue, analyse each (with retries), publish the event
(and a copy to the review topic when it needs a human look) and only then release the burst's offsets,
so the ingest loop can commit past them. A shutdown hands queued and unfinished bursts back uncommitted.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import orjson
from aiokafka.errors import KafkaError, MessageSizeTooLargeError, RecordListTooLargeError
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from analysis.intake.redact import Redactor, redact_analysis
from analysis.report import Analysis
from consumer.analyzer import Analyzer, analyze_or_fail, failed_analysis
from consumer.cloudevent import fitting_events, traceparent_of
from consumer.kafka import EventSink, Headers, dlq_headers
from consumer.logs import log_event, log_fields
from consumer.metrics import Metrics
from consumer.offsets import OffsetTracker
from consumer.retry import Backoff, sleep_unless
from consumer.settings import Settings, env_name
from consumer.window import ClosedBurst

__all__ = ["AnalysisWorkers", "ServiceStats"]

log = logging.getLogger(__name__)

_CONTENT_TYPE = ("content-type", b"application/cloudevents+json; charset=UTF-8")
_DLQ_TYPE_CHARS = 200  # of the exception type in a DLQ record (ids are capped at 256 by the decoder)


@dataclass
class ServiceStats:
    """Counters a caller (the demo, tests) can read without scraping metrics."""

    events_in: int = 0
    """Input messages read."""
    records_in: int = 0
    """Messages the window stage counted: repartition records (not replays, nor watermark records), or
    input messages when it is keyed."""
    replays_skipped: int = 0
    """Repartition records skipped as replays of records already counted."""
    dlq: int = 0
    bursts_closed: int = 0
    published: int = 0
    failed: int = 0
    """Published analyses with status `failed`."""
    pauses: int = 0
    """Times fetching paused for backpressure."""


class AnalysisWorkers:
    """The queue of closed bursts and the workers that analyse, publish and release them."""

    def __init__(self, settings: Settings, analyzer: Analyzer, metrics: Metrics, offsets: OffsetTracker,
                 stats: ServiceStats) -> None:
        self._settings = settings
        self._analyzer = analyzer
        self._metrics = metrics
        self._offsets = offsets
        self._stats = stats
        self._source = settings.pipeline.event_source or f"logagent/{settings.kafka.group_id}"
        self._redactor = Redactor(settings.redaction)
        p = settings.pipeline
        self._backoff = Backoff(p.retry_initial_s, p.retry_max_s, p.retry_attempts)
        self._queue: asyncio.Queue[ClosedBurst] = asyncio.Queue()
        self._busy = 0
        self._no_work_running = asyncio.Event()
        self._no_work_running.set()
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def depth(self) -> int:
        """Closed bursts waiting for a worker."""
        return self._queue.qsize()

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing being analysed."""
        return self._queue.empty() and self._busy == 0

    def start(self, sink: EventSink, stop: asyncio.Event) -> None:
        """Start `max_inflight` workers publishing through `sink` until `stop` is set."""
        self._tasks = [asyncio.create_task(self._work(sink, stop))
                       for _ in range(self._settings.pipeline.max_inflight)]

    def put(self, closed: ClosedBurst) -> None:
        """Queue a closed burst; its offsets stay held until its analysis is published."""
        for tp, offset in closed.offsets.items():
            self._offsets.hold(tp, offset, closed.token)
        self._queue.put_nowait(closed)
        self._stats.bursts_closed += 1
        self._metrics.bursts_closed.labels(closed.reason).inc()
        self._metrics.inflight.set(self._queue.qsize() + self._busy)

    def check(self) -> None:
        """Re-raise the error of a worker that died: it must take the service down, loudly."""
        for task in self._tasks:
            if task.done():
                task.result()

    async def finish(self) -> int:
        """Let running analyses finish within the grace period; returns how many bursts were handed back."""
        # Workers take no new job once `stop` is set, so this only waits for the running ones.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._no_work_running.wait(), self._settings.pipeline.shutdown_grace_s)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        return self._queue.qsize() + self._busy

    async def _work(self, sink: EventSink, stop: asyncio.Event) -> None:
        while not stop.is_set():
            closed = await self._queue.get()
            if stop.is_set():
                return  # handed back: its offsets stay held and uncommitted, a restart replays it
            self._busy += 1
            self._no_work_running.clear()
            try:
                started = time.perf_counter()
                analysis = await analyze_or_fail(self._analyzer, closed.cluster, self._backoff, stop)
                seconds = time.perf_counter() - started
                self._metrics.analysis_seconds.observe(seconds)
                if analysis is not None and await self._publish(sink, analysis, closed, stop, seconds):
                    self._offsets.release(closed.token, closed.spans)
            finally:
                self._busy -= 1
                if not self._busy:
                    self._no_work_running.set()
                self._metrics.inflight.set(self._queue.qsize() + self._busy)

    async def _publish(self, sink: EventSink, analysis: Analysis, closed: ClosedBurst, stop: asyncio.Event,
                       seconds: float) -> bool:
        """Publish the analysis event keyed by server id, cut to fit the record limit (`fitting_events`) or,
        when no cut fits, a DLQ record saying so; False when stopped before it was acknowledged."""
        kafka = self._settings.kafka
        try:
            analysis = redact_analysis(analysis, self._redactor)  # whichever analyzer made it, failures included
        except Exception as error:  # a value redaction cannot keep in its type: the burst is reported, never lost
            log.exception("analysis could not be redacted", extra=log_fields(analysis_id=analysis.analysis_id))
            analysis = redact_analysis(failed_analysis(closed.cluster, f"redaction failed: {type(error).__name__}"),
                                       self._redactor)
        traceparent = traceparent_of(closed.cluster.representative, analysis.analysis_id)
        headers = [_CONTENT_TYPE] + ([("traceparent", traceparent.encode())] if traceparent else [])
        key = analysis.cluster.server.encode()

        def size(value: bytes) -> int:  # as the producer and the broker count a record
            return int(DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, headers))

        forms = fitting_events(analysis, self._source, kafka.max_event_bytes, size, traceparent)
        for topic, kind in ((kafka.output_topic, "analysis"), (kafka.review_topic, "review")):
            sent = await self._publish_first(sink, topic, key, headers, forms, stop)
            if sent == "stopped":
                return False
            if sent == "too_large":
                await self._dead_letter(sink, analysis, closed, topic)
                return True
            self._metrics.published.labels(kind).inc()
            published, value = sent
            if not published.needs_review:
                break
            forms = itertools.chain((sent,), forms)  # the review copy: the same event, or a smaller cut
        if published is not analysis:
            log.warning("analysis event cut to fit the record limit", extra=log_fields(
                analysis_id=analysis.analysis_id, max_event_bytes=kafka.max_event_bytes, event_bytes=len(value)))
        self._stats.published += 1
        if analysis.status == "failed":
            self._stats.failed += 1
        self._metrics.analyses.labels(analysis.status, analysis.analyzer).inc()
        culprit = analysis.culprit
        level = logging.WARNING if analysis.status == "failed" else logging.INFO
        log.log(level, "burst analysed", extra=log_event("burst-analysed",
            server=analysis.cluster.server, fingerprint=analysis.cluster.fingerprint,
            count=analysis.cluster.count, status=analysis.status,
            culprit=f"{culprit.path}:{culprit.line or ''}" if culprit else None,
            seconds=round(seconds, 3), analysis_id=analysis.analysis_id))
        return True

    async def _publish_first(self, sink: EventSink, topic: str, key: bytes, headers: Headers,
                             forms: Iterator[tuple[Analysis, bytes]], stop: asyncio.Event,
                             ) -> tuple[Analysis, bytes] | Literal["stopped", "too_large"]:
        """Publish the first of `forms` the broker takes, retrying other faults (the last one raises);
        "too_large" when it refuses every one as too large (its limit is below `kafka.max_event_bytes`),
        "stopped" when stopped while waiting to retry."""
        for form, value in forms:
            for attempt in range(1, self._backoff.attempts + 1):
                try:
                    await sink.publish(topic, key, value, headers)
                    return form, value
                except (MessageSizeTooLargeError, RecordListTooLargeError):
                    break  # the same bytes would be refused again: the next, smaller cut
                except KafkaError as error:
                    if attempt == self._backoff.attempts:
                        raise
                    log.warning("publish failed, retrying", extra=log_fields(error=type(error).__name__))
                    if await sleep_unless(stop, self._backoff.delay(attempt)):
                        return "stopped"
        return "too_large"

    async def _dead_letter(self, sink: EventSink, analysis: Analysis, closed: ClosedBurst, topic: str) -> None:
        """No cut of the event fits `topic`: the DLQ gets what names the burst, and why (reason
        `analysis_too_large`), so that its offsets move on instead of the publish failing on every replay."""
        kafka = self._settings.kafka
        cluster = analysis.cluster
        tp, offset = min(closed.offsets.items())  # where the burst starts
        value = orjson.dumps({
            "analysis_id": analysis.analysis_id, "status": analysis.status, "topic": topic,
            "max_event_bytes": kafka.max_event_bytes, "cluster": {
                "server": cluster.server, "tenant": cluster.tenant, "fingerprint": cluster.fingerprint,
                "exception_type": cluster.exception_type[:_DLQ_TYPE_CHARS], "first_seen": cluster.first_seen,
                "last_seen": cluster.last_seen, "count": cluster.count}})
        error = (f"the analysis event does not fit {topic} even cut: over {env_name('kafka', 'max_event_bytes')}"
                 f"={kafka.max_event_bytes} or refused by the broker as too large")
        headers = [*dlq_headers("analysis_too_large", tp, offset, error, kafka.dlq_error_max_chars),
                   ("analysis_id", analysis.analysis_id.encode())]
        await sink.publish(kafka.dlq_topic, cluster.server.encode(), value, headers)
        self._stats.dlq += 1
        self._metrics.dlq.labels("analysis_too_large").inc()
        self._metrics.published.labels("dlq").inc()
        log.error("analysis event too large for its topic, sent to the DLQ", extra=log_event(
            "analysis-dead-lettered", server=cluster.server, fingerprint=cluster.fingerprint,
            analysis_id=analysis.analysis_id, topic=topic))
