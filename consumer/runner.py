"""`logagent run`: the long-running service with its HTTP endpoint, feedback listener and housekeeping."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import time
from functools import partial
from pathlib import Path

from analysis.intake.redact import Redactor, redact_value
from consumer.explainer import Explainer, build_explainer
from consumer.feedback import FeedbackListener
from consumer.http import HealthState, HttpEndpoint, degradations, serve_http
from consumer.logs import configure_logging, log_event, log_fields, log_settings
from consumer.metrics import Metrics, build_info
from consumer.pipeline import Service
from consumer.retry import sleep_unless
from consumer.settings import ConfigError, Settings, env_name, masked_url, writable_dir
from store import StoreError

__all__ = ["configure_gc", "run_service", "serve"]

log = logging.getLogger(__name__)

_HOUSEKEEPING_S = 1.0
_PROBE_S = 15.0  # between probes of an Ollama that has not answered yet
_MAX_LOGGED_SERVERS = 100


def configure_gc() -> None:
    """Collect the young generation less often. Decoding allocates many short-lived objects that form no
    cycles, so default thresholds spend a fifth of the hot path in the collector (bench/grouping.py);
    what start-up loaded is frozen out of every later collection."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def run_service(settings: Settings) -> int:
    """`logagent run`: serve until SIGTERM or SIGINT, then shut down cleanly and return 0. A setting that
    cannot work (port taken, broker unreachable, TLS files unusable) raises ConfigError."""
    version, commit = build_info()
    redactor = Redactor(settings.redaction)
    redactor.ready()  # a machine's first start compiles the prefilter: a failure stops the start here
    configure_logging(settings.log_level, partial(redact_value, redactor=redactor),
                      service={"version": version, "node.name": settings.kafka.client_id})
    configure_gc()
    return asyncio.run(_serve(settings, version, commit))


async def _serve(settings: Settings, version: str, commit: str) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await serve(settings, stop, version, commit)
    return 0


async def serve(settings: Settings, stop: asyncio.Event, version: str = "unknown", commit: str = "unknown") -> None:
    """The service with its HTTP endpoint, feedback listener and housekeeping, until `stop` is set."""
    metrics = Metrics()
    metrics.build_info.labels(version, commit).set(1)
    metrics.heuristic_mode.set(0 if settings.ollama.url else 1)
    health = HealthState(broker_grace_s=settings.readiness.broker_grace_s,
                         llm_configured=settings.ollama.url is not None, stall_after_s=settings.http.stall_after_s)
    _check_data_dirs(settings)
    explainer = build_explainer(settings, metrics)
    try:
        with _open_http(settings, metrics, health) as endpoint:
            _log_start(settings, endpoint.port, version, commit)
            await _warn_servers_without_repository(settings, explainer)
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(Service(settings, explainer, metrics, health).run(stop))
                tasks.create_task(_housekeeping(settings, explainer, health, metrics, stop))
                if explainer.memory is not None:
                    tasks.create_task(FeedbackListener(settings, explainer.memory, metrics).run(stop))
    except BaseExceptionGroup as group:
        raise _config_error(group) or group from None
    finally:
        explainer.close()


def _config_error(group: BaseExceptionGroup) -> ConfigError | None:
    """The first ConfigError inside a task group's failure, which the CLI turns into one line."""
    for error in group.exceptions:
        if isinstance(error, ConfigError):
            return error
        if isinstance(error, BaseExceptionGroup):
            found = _config_error(error)
            if found is not None:
                return found
    return None


def _open_http(settings: Settings, metrics: Metrics, health: HealthState) -> HttpEndpoint:
    http = settings.http
    try:
        return serve_http(http.host, http.port, metrics, health)
    except OSError as error:
        raise ConfigError(f"{env_name('http', 'port')}={http.port} cannot be served on {http.host} "
                          f"({error.strerror or error}): pick a free port, or stop what listens there") from None


def _check_data_dirs(settings: Settings) -> None:
    """The repository cache and a memory on local disk must be directories this process writes: a data dir
    that is a file, or unwritable, failed later with a traceback."""
    local = [(settings.repo.cache_dir, env_name("repo", "cache_dir"))]
    if "://" not in settings.memory.uri:
        local.append((Path(settings.memory.uri), env_name("memory", "uri")))
    for path, setting in local:
        writable_dir(path, env_name("data_dir") if path.is_relative_to(settings.data_dir) else setting)


def _log_start(settings: Settings, port: int, version: str, commit: str) -> None:
    """The one line that says what this replica talks to, so a wrong setting shows at a glance."""
    kafka = settings.kafka
    servers = sorted(settings.repo_servers())
    log.info("logagent started", extra=log_settings(
        "service-started", version=version, commit=commit,
        broker=masked_url(kafka.bootstrap_servers), security_protocol=kafka.security_protocol,
        group=kafka.group_id,
        topics={"input": kafka.input_topic, "output": kafka.output_topic, "dlq": kafka.dlq_topic,
                "review": kafka.review_topic, "feedback": kafka.feedback_topic},
        servers_with_repository=servers[:_MAX_LOGGED_SERVERS], servers_with_repository_count=len(servers),
        memory=masked_url(settings.memory.uri), embedder=settings.memory.embedder,
        model=settings.agent.model if settings.ollama.url else None,
        ollama=masked_url(settings.ollama.url) if settings.ollama.url else "unset: heuristic mode",
        http_port=port))


async def _warn_servers_without_repository(settings: Settings, explainer: Explainer) -> None:
    """Servers the memory has seen whose repository is not configured: their bursts get trace-only answers."""
    if explainer.memory is None:
        return
    try:
        seen = {summary.server for summary in await asyncio.to_thread(explainer.memory.servers, time.time())}
    except StoreError as error:
        log.debug("could not list the servers in memory", extra=log_fields(error=str(error)[:200]))
        return
    missing = sorted(seen - set(settings.repo_servers()))
    if missing:
        log.warning("servers seen without a repository: their bursts get trace-only analyses flagged for "
                    f"review; add them to {env_name('repos_file')}",
                    extra=log_event("servers-without-repository", servers=missing[:_MAX_LOGGED_SERVERS],
                                    count=len(missing)))


async def _housekeeping(settings: Settings, explainer: Explainer, health: HealthState, metrics: Metrics,
                        stop: asyncio.Event) -> None:
    """Keep readiness current (store reachable, LLM circuit) and run memory maintenance periodically."""
    memory = explainer.memory
    next_maintenance = time.monotonic() + settings.memory_maintenance_s
    next_probe = time.monotonic()
    while not stop.is_set():
        if time.monotonic() >= next_probe:  # until Ollama answers once (`Explainer.probe_llm`)
            await asyncio.to_thread(explainer.probe_llm)
            next_probe = time.monotonic() + _PROBE_S
        health.set_ollama_reachable(explainer.llm_reachable)
        degraded = degradations(health.snapshot())
        metrics.degraded.labels("ollama_unreachable").set(1 if "ollama_unreachable" in degraded else 0)
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
