"""The operability endpoint: `/metrics` for Prometheus, `/livez` and `/readyz` for the kubelet.

It runs on a stdlib `ThreadingHTTPServer` in a daemon thread so a slow scrape never blocks the
consumer loop, and it reads only what it is handed: the injected metrics registry and a `HealthState`
that the pipeline updates as the broker answers, the store opens and Ollama comes and goes. The main
loop also reports each turn (`beat`): /livez fails once it has been silent for the stall limit, so the
kubelet restarts a process stuck on one message while its HTTP thread still answers.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Protocol

import orjson
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

__all__ = ["IDLE_TIMEOUT_S", "MAX_CONNECTIONS", "MAX_CONNECTION_S", "HealthSnapshot", "HealthState", "HttpEndpoint",
           "Readiness", "degradations", "readiness_checks", "serve_http"]

IDLE_TIMEOUT_S = 5.0
"""How long a connection may stay silent (no request, or a request not finished) before it is closed."""
MAX_CONNECTIONS = 64
"""Connections served at once (a newer one ends the oldest); the endpoint has no authentication, and each
connection holds a thread."""
MAX_CONNECTION_S = 10.0
"""How long a connection may last in all: a client trickling a byte now and then resets the idle timeout."""



class Exported(Protocol):
    """What `/metrics` serves: a registry (the service's `Metrics`, or `logagent notify`'s own)."""

    registry: CollectorRegistry


class Readiness(Protocol):
    """What `/readyz` asks: named checks, ready when every one passes."""

    def checks(self) -> dict[str, bool]:
        """Each check's name and whether it passes."""


@dataclass(frozen=True)
class HealthSnapshot:
    """One consistent reading of the health flags."""

    store_open: bool
    broker_reachable: bool
    """The broker answered within the grace period (brief blips keep the replica ready)."""
    partitions: int = 0
    """Partitions owned now; zero is normal (more replicas than partitions, a rebalance in flight)."""
    llm_configured: bool = False
    ollama_reachable: bool = False


def readiness_checks(snapshot: HealthSnapshot) -> dict[str, bool]:
    """Name each readiness check and say whether it passes; ready means every value is True.

    Ready means "can serve its share": a replica without partitions is a standby that takes over on the
    next rebalance, and one whose Ollama is down still answers heuristically, so neither fails readiness
    (a rollout would otherwise hang on them); `degradations` reports the second.
    """
    return {"store_open": snapshot.store_open, "broker_reachable": snapshot.broker_reachable}


def degradations(snapshot: HealthSnapshot) -> list[str]:
    """What this ready replica does in a lesser way right now (also the `logagent_degraded` gauge)."""
    return ["ollama_unreachable"] if snapshot.llm_configured and not snapshot.ollama_reachable else []


class HealthState:
    """Readiness flags shared between the pipeline and housekeeping (writers) and the HTTP threads (readers).

    The broker counts as reachable until `broker_grace_s` after its last answer; before the first answer
    (still connecting) it does not. The main loop may go `stall_after_s` without a turn before /livez fails.
    """

    def __init__(self, *, broker_grace_s: float = 60.0, llm_configured: bool = False,
                 clock: Callable[[], float] = time.monotonic, stall_after_s: float = 120.0) -> None:
        self._lock = threading.Lock()
        self._grace_s = broker_grace_s
        self._clock = clock
        self._broker_answered_at: float | None = None
        self._partitions = 0
        self._store_open = False
        self._ollama_reachable = False
        self._llm_configured = llm_configured
        self._stall_after_s = stall_after_s
        self._last_beat: float | None = None  # None until the loop turns first, and once it has stopped

    def beat(self) -> None:
        """The main loop made progress (one turn: fetch, ingest, windows, commit)."""
        self._last_beat = self._clock()  # one float store: atomic under the GIL, no lock on the hot loop

    def loop_stopped(self) -> None:
        """The main loop ended (shutdown): its silence from now on is no stall."""
        self._last_beat = None

    def stalled_for(self) -> float | None:
        """Seconds since the main loop's last turn when that is past the stall limit, else None."""
        last = self._last_beat
        if last is None:
            return None
        silent = self._clock() - last
        return silent if silent > self._stall_after_s else None

    def set_partitions(self, count: int) -> None:
        """Record how many partitions the consumer owns now."""
        with self._lock:
            self._partitions = count

    def broker_answered(self) -> None:
        """Record that the broker just answered a request."""
        with self._lock:
            self._broker_answered_at = self._clock()

    def set_store_open(self, is_open: bool) -> None:
        """Record whether the memory store is open and usable."""
        with self._lock:
            self._store_open = is_open

    def set_ollama_reachable(self, reachable: bool) -> None:
        """Record whether Ollama answered (its circuit is closed)."""
        with self._lock:
            self._ollama_reachable = reachable

    def snapshot(self) -> HealthSnapshot:
        """Read all flags at once, so one response never mixes two states."""
        with self._lock:
            answered = self._broker_answered_at
            return HealthSnapshot(
                store_open=self._store_open,
                broker_reachable=answered is not None and self._clock() - answered <= self._grace_s,
                partitions=self._partitions,
                llm_configured=self._llm_configured,
                ollama_reachable=self._ollama_reachable,
            )

    def checks(self) -> dict[str, bool]:
        """The readiness checks of one snapshot."""
        return readiness_checks(self.snapshot())

    def details(self) -> dict[str, object]:
        """What a ready replica does in a lesser way, and how many partitions it owns."""
        snapshot = self.snapshot()
        return {"degraded": degradations(snapshot), "partitions": snapshot.partitions}


class HttpEndpoint:
    """A running endpoint: its bound `port`, and `close()` to stop it (also a context manager)."""

    def __init__(self, server: ThreadingHTTPServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread
        self.port: int = server.server_address[1]

    def close(self) -> None:
        """Stop serving and release the socket; safe to call twice."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()

    def __enter__(self) -> HttpEndpoint:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _Handler(BaseHTTPRequestHandler):
    """Routes the three paths; the server carries the metrics and health it serves."""

    server: _Server
    timeout = IDLE_TIMEOUT_S  # a client silent this long is dropped: it holds a thread meanwhile
    _head_only = False

    def do_HEAD(self) -> None:
        """GET's status and headers without its body (`curl -I`, some uptime checkers)."""
        self._head_only = True
        self.do_GET()

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            self._reply(HTTPStatus.OK, encoder(self.server.metrics.registry), content_type)
        elif path == "/livez":
            health = self.server.health
            stalled = health.stalled_for() if isinstance(health, HealthState) else None
            if stalled is None:
                self._reply(HTTPStatus.OK, b"ok\n", "text/plain; charset=utf-8")
            else:
                body = f"main loop stalled: no progress for {stalled:.0f}s\n".encode()
                self._reply(HTTPStatus.SERVICE_UNAVAILABLE, body, "text/plain; charset=utf-8")
        elif path == "/readyz":
            health = self.server.health
            checks = health.checks()
            failing = sorted(name for name, passed in checks.items() if not passed)
            status = HTTPStatus.SERVICE_UNAVAILABLE if failing else HTTPStatus.OK
            details = health.details() if isinstance(health, HealthState) else {}
            body = orjson.dumps({"ready": not failing, "failing": failing, "checks": checks, **details})
            self._reply(status, body, "application/json")
        else:
            self._reply(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")

    def _reply(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not self._head_only:
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the scraper or probe gave up first; nothing to tell it, nothing to log

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: probes and scrapes every few seconds would drown the service's own log lines."""


class _Server(ThreadingHTTPServer):
    """A thread per connection, at most `MAX_CONNECTIONS` at once: a connection past that ends the oldest one,
    so silent or trickling clients can neither pile up threads nor lock out the kubelet's probes (which take
    milliseconds). A connection lasts `MAX_CONNECTION_S` at most (checked between polls, every 0.1 s)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], metrics: Exported, health: Readiness) -> None:
        self.metrics = metrics
        self.health = health
        self._lock = threading.Lock()
        self._live: dict[socket.socket, float] = {}  # open connections and when they came, oldest first
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            if len(self._live) >= MAX_CONNECTIONS:
                oldest = next(iter(self._live))
                del self._live[oldest]
                _hang_up(oldest)
            self._live[request] = time.monotonic()
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._live.pop(request, None)

    def service_actions(self) -> None:
        """Between polls of `serve_forever`: end the connections past their time."""
        cutoff = time.monotonic() - MAX_CONNECTION_S
        with self._lock:
            late = list(itertools.takewhile(lambda connection: self._live[connection] < cutoff, self._live))
            for connection in late:
                del self._live[connection]
        for connection in late:
            _hang_up(connection)


def _hang_up(connection: socket.socket) -> None:
    """End a connection past its time: its thread's blocked read returns, and the thread ends."""
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)


def serve_http(host: str, port: int, metrics: Exported, health: Readiness) -> HttpEndpoint:
    """Start serving `/metrics`, `/livez` and `/readyz` on host:port (port 0 picks a free one)."""
    server = _Server((host, port), metrics, health)
    # A short poll keeps close() quick on shutdown; the idle wake-ups cost nothing measurable.
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="logagent-http", daemon=True
    )
    thread.start()
    return HttpEndpoint(server, thread)
