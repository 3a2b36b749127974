"""`logagent run`: the long-running service with its HTTP endpoint, feedback listener and housekeeping."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import time
from functools import partial

from analysis.intake.redact import Redactor, redact_value
from consumer.explainer import Explainer, build_explainer
from consumer.feedback import FeedbackListener
from consumer.http import HealthState, serve_http
from consumer.logs import configure_logging, log_fields
from consumer.metrics import Metrics
from consumer.pipeline import Service
from consumer.retry import sleep_unless
from consumer.settings import Settings
from store import StoreError

__all__ = ["configure_gc", "run_service"]

log = logging.getLogger(__name__)

_HOUSEKEEPING_S = 1.0


def configure_gc() -> None:
    """Collect the young generation less often. Decoding allocates many short-lived objects that form no
    cycles, so default thresholds spend a fifth of the hot path in the collector (bench/grouping.py);
    what start-up loaded is frozen out of every later collection."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def run_service(settings: Settings) -> int:
    """`logagent run`: serve until SIGTERM or SIGINT, then shut down cleanly and return 0."""
    redactor = Redactor(settings.redaction)
    configure_logging(settings.log_level, partial(redact_value, redactor=redactor))
    configure_gc()
    return asyncio.run(_serve(settings))


async def _serve(settings: Settings) -> int:
    metrics = Metrics()
    health = HealthState(heuristic_mode=settings.ollama.url is None)
    explainer = build_explainer(settings, metrics)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    with serve_http(settings.http.host, settings.http.port, metrics, health):
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(Service(settings, explainer, metrics, health).run(stop))
                tasks.create_task(_housekeeping(settings, explainer, health, stop))
                if explainer.memory is not None:
                    tasks.create_task(FeedbackListener(settings, explainer.memory, metrics).run(stop))
        finally:
            explainer.close()
    return 0


async def _housekeeping(settings: Settings, explainer: Explainer, health: HealthState, stop: asyncio.Event) -> None:
    """Keep readiness current (store reachable, LLM circuit) and run memory maintenance periodically."""
    memory = explainer.memory
    next_maintenance = time.monotonic() + settings.memory_maintenance_s
    while not stop.is_set():
        health.set_ollama_reachable(explainer.llm_reachable)
        if memory is not None:
            try:
                await asyncio.to_thread(memory.open)
                health.set_store_open(True)
                if time.monotonic() >= next_maintenance:
                    report = await asyncio.to_thread(memory.maintain, time.time())
                    log.info("memory maintained", extra=log_fields(expired=report.expired_deleted,
                                                                   indexed=list(report.indexed)))
                    next_maintenance = time.monotonic() + settings.memory_maintenance_s
            except StoreError as error:
                health.set_store_open(False)
                log.warning("memory store unavailable", extra=log_fields(error=str(error)[:200]))
        else:
            health.set_store_open(True)
        if await sleep_unless(stop, _HOUSEKEEPING_S):
            return
