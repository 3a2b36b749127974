"""A deterministic, realistic error stream for the benchmarks: generated on demand, never committed.

Each server is one service in one language that logs in one input shape (native, ECS, OpenTelemetry,
logstash). Its failures arrive in bursts that overlap in time; inside a burst the same failure repeats
many times with fresh ids in its message, and after a deploy the in-app line numbers move. The ground
truth (failure, server, commit) rides along with every line so benchmarks can check what they count.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from bench.traces import DOMAINS, Failure, Language, fill, make_failure, render_frames, render_trace

_SERVER_KINDS: tuple[tuple[Language, str], ...] = (
    ("java", "logstash"), ("python", "native"), ("node", "otel"), ("go", "ecs"),
    ("java", "ecs"), ("python", "ecs"), ("node", "ecs"), ("go", "logstash"),
)
_MESSAGE_ONLY_SHARE = 0.2


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """Size and shape of a generated stream."""

    events: int = 100_000
    servers: int = 8
    failures_per_server: int = 20
    concurrent_bursts: int = 12
    burst_min: int = 20
    burst_max: int = 400
    depth_min: int = 20
    depth_max: int = 60
    deploys_per_server: int = 3
    mean_gap_s: float = 0.01
    start: float = 1_717_000_000.0
    seed: int = 20_240_601
    fresh_failures: bool = False
    """Every burst takes a failure no burst had before (the churn stream: with bursts of one, every
    trace is new); `failures_per_server` must cover the bursts."""


@dataclass(frozen=True, slots=True)
class WorkloadEvent:
    """One Kafka message value, the text a log miner reads, and the ground truth behind it."""

    line: bytes
    text: str
    failure: int
    server: str
    commit: str


@dataclass(slots=True)
class _Server:
    name: str
    language: Language
    shape: str
    failures: list[int]
    deploy: int = 0


@dataclass(slots=True)
class _Burst:
    failure: int
    server: _Server
    remaining: int


def generate(spec: WorkloadSpec = WorkloadSpec()) -> list[WorkloadEvent]:
    """The whole stream, in arrival order; the same spec always yields the same bytes."""
    return list(stream(spec))


def stream(spec: WorkloadSpec = WorkloadSpec()) -> Iterator[WorkloadEvent]:
    """The stream event by event, for streams too large to hold (`generate` is its list)."""
    rng = random.Random(spec.seed)
    servers, failures = _catalogue(spec, rng)
    frame_cache: dict[tuple[int, str, int], tuple[str, list[dict[str, Any]]]] = {}
    commits_per_deploy = spec.events // max(1, spec.deploys_per_server)
    active: list[_Burst] = []
    emitted = 0
    now = spec.start
    while emitted < spec.events:
        while len(active) < spec.concurrent_bursts:
            server = rng.choice([s for s in servers if s.failures] if spec.fresh_failures else servers)
            size = rng.randint(spec.burst_min, spec.burst_max)
            failure_id = server.failures.pop() if spec.fresh_failures else rng.choice(server.failures)
            active.append(_Burst(failure_id, server, size))
        burst = active[rng.randrange(len(active))]
        burst.remaining -= 1
        if burst.remaining <= 0:
            active.remove(burst)
        server = burst.server
        server.deploy = min(emitted // commits_per_deploy, spec.deploys_per_server - 1)
        key = (burst.failure, server.name, server.deploy)
        failure = failures[burst.failure]
        if key not in frame_cache:
            shift = server.deploy * 3  # each deploy adds a few lines above the in-app code
            structured = _structured_frames(failure, server.deploy) if server.shape == "native" else []
            frame_cache[key] = (render_frames(failure, shift, jvm=hash_seed(server.name, server.deploy)),
                                structured)
        now += rng.expovariate(1.0 / spec.mean_gap_s)
        commit = commit_of(server.name, server.deploy)
        frame_text, structured = frame_cache[key]
        yield _event(rng, server, failure, burst.failure, frame_text, structured, commit, now)
        emitted += 1
        if spec.fresh_failures and burst.remaining <= 0:
            for deploy in range(spec.deploys_per_server):  # no burst takes this failure again
                frame_cache.pop((burst.failure, server.name, deploy), None)


def hash_seed(name: str, deploy: int) -> int:
    """A stable small number per (server, deploy): the process identity that varies proxy names."""
    return (sum(ord(c) * (i + 1) for i, c in enumerate(name)) * 7919 + deploy * 104_729) % 65_521


def commit_of(server: str, deploy: int) -> str:
    """The 40-hex commit `server` runs after its `deploy`-th deploy."""
    return hashlib.sha1(f"{server}:{deploy}".encode(), usedforsecurity=False).hexdigest()


def _catalogue(spec: WorkloadSpec, rng: random.Random) -> tuple[list[_Server], list[Failure]]:
    servers: list[_Server] = []
    failures: list[Failure] = []
    for i in range(spec.servers):
        language, shape = _SERVER_KINDS[i % len(_SERVER_KINDS)]
        server = _Server(f"{DOMAINS[i % len(DOMAINS)]}-{language}-{i}", language, shape, [])
        for _ in range(spec.failures_per_server):
            kind: Language = "message" if rng.random() < _MESSAGE_ONLY_SHARE else language
            server.failures.append(len(failures))
            failures.append(make_failure(rng, kind, rng.randint(spec.depth_min, spec.depth_max),
                                         DOMAINS[i % len(DOMAINS)]))
        servers.append(server)
    return servers, failures


def _event(rng: random.Random, server: _Server, failure: Failure, failure_id: int, frame_text: str,
           structured: list[dict[str, Any]], commit: str, now: float) -> WorkloadEvent:
    header = fill(failure.template, failure.names, rng)
    if failure.language == "message":
        message, trace, exc_type = header, "", ""
    else:
        message = fill("{verb} {noun_l} {id} failed", failure.names, rng)
        cause = ""
        if failure.cause is not None:
            cause = f"{failure.cause[0]}: {fill(failure.cause[1], failure.names, rng)}"
        trace = render_trace(failure, header, frame_text, cause, goroutine=rng.randint(1, 90_000))
        exc_type = failure.exc_type
    record = encode(server.shape, server=server.name, message=message, commit=commit, now=now,
                    exc_type=exc_type, exc_value=header, trace=trace, frames=structured)
    text = f"{message}\n{trace}" if trace else message
    return WorkloadEvent(orjson.dumps(record), text, failure_id, server.name, commit)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def encode(shape: str, *, server: str, message: str, commit: str, now: float, exc_type: str = "",
           exc_value: str = "", trace: str = "", frames: list[dict[str, Any]] | None = None,
           chained: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One log record in `shape` (native, ecs, logstash, otel) as a logging library would write it;
    `chained` (native only) are the exception's causes, each `{type, value, stacktrace}`."""
    if shape == "native":
        record: dict[str, Any] = {"server_id": server, "timestamp": now, "level": "error",
                                  "logger": f"{server}.app", "message": message, "commit": commit}
        if exc_type:
            # Structured frames (outermost first), the way SDKs that capture exceptions send them.
            record["exception"] = {"type": exc_type, "value": exc_value, "stacktrace": frames or []}
            if chained:
                record["exception"]["chained"] = chained
        return record
    if shape == "ecs":
        record = {"@timestamp": _iso(now), "log.level": "error", "message": message, "service.name": server,
                  "service.version": commit, "ecs.version": "1.6.0", "log.logger": f"{server}.app"}
        if exc_type:
            record.update({"error.type": exc_type, "error.message": exc_value, "error.stack_trace": trace})
        return record
    if shape == "logstash":
        record = {"@timestamp": _iso(now), "@version": "1", "message": message,
                  "logger_name": f"com.acme.{server}.App", "thread_name": "http-nio-8080-exec-3",
                  "level": "ERROR", "level_value": 40000, "app_name": server, "commit": commit}
        if trace:
            record["stack_trace"] = trace
        return record
    return _otel(server, message, exc_type, exc_value, trace, commit, now)


def _otel(server: str, message: str, exc_type: str, exc_value: str, trace: str, commit: str,
          now: float) -> dict[str, Any]:
    def attr(key: str, value: str) -> dict[str, Any]:
        return {"key": key, "value": {"stringValue": value}}

    attributes = [attr("exception.type", exc_type), attr("exception.message", exc_value),
                  attr("exception.stacktrace", trace)] if exc_type else []
    log_record = {"timeUnixNano": str(int(now * 1e9)), "severityNumber": 17, "severityText": "ERROR",
                  "body": {"stringValue": message}, "attributes": attributes}
    resource = {"attributes": [attr("service.name", server), attr("service.version", commit)]}
    return {"resourceLogs": [{"resource": resource,
                              "scopeLogs": [{"scope": {"name": "app"}, "logRecords": [log_record]}]}]}


def _structured_frames(failure: Failure, deploy: int) -> list[dict[str, Any]]:
    return [{"filename": file.rsplit("/", 1)[-1], "abs_path": file, "function": function,
             "lineno": line + (3 * deploy if file.startswith("/app/") else 0),
             "in_app": file.startswith("/app/")}
            for function, file, line in failure.frames]
