"""The operability endpoint: `/metrics` for Prometheus, `/livez` and `/readyz` for the kubelet.

It runs on a stdlib `ThreadingHTTPServer` in a daemon thread so a slow scrape never blocks the
consumer loop, and it reads only what it is handed: the injected metrics registry and a `HealthState`
that the pipeline updates as partitions are assigned, the store opens and Ollama comes and goes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Protocol

import orjson
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

__all__ = ["HealthSnapshot", "HealthState", "HttpEndpoint", "Readiness", "readiness_checks", "serve_http"]


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

    partitions_assigned: bool
    store_open: bool
    ollama_reachable: bool
    heuristic_mode: bool


def readiness_checks(snapshot: HealthSnapshot) -> dict[str, bool]:
    """Name each readiness check and say whether it passes; ready means every value is True."""
    return {
        "partitions_assigned": snapshot.partitions_assigned,
        "store_open": snapshot.store_open,
        # Without an Ollama URL the service answers with the heuristic localiser, which needs no LLM.
        "ollama_reachable_or_heuristic": snapshot.ollama_reachable or snapshot.heuristic_mode,
    }


class HealthState:
    """Readiness flags shared between the pipeline (writer) and the HTTP threads (readers)."""

    def __init__(self, *, heuristic_mode: bool = False) -> None:
        self._lock = threading.Lock()
        self._partitions_assigned = False
        self._store_open = False
        self._ollama_reachable = False
        self._heuristic_mode = heuristic_mode

    def set_partitions_assigned(self, assigned: bool) -> None:
        """Record whether the consumer currently owns at least one partition."""
        with self._lock:
            self._partitions_assigned = assigned

    def set_store_open(self, is_open: bool) -> None:
        """Record whether the memory store is open and usable."""
        with self._lock:
            self._store_open = is_open

    def set_ollama_reachable(self, reachable: bool) -> None:
        """Record whether Ollama answered (its circuit is closed)."""
        with self._lock:
            self._ollama_reachable = reachable

    def set_heuristic_mode(self, heuristic: bool) -> None:
        """Record whether the service runs without an LLM, so Ollama is not needed to be ready."""
        with self._lock:
            self._heuristic_mode = heuristic

    def snapshot(self) -> HealthSnapshot:
        """Read all flags at once, so one response never mixes two states."""
        with self._lock:
            return HealthSnapshot(
                partitions_assigned=self._partitions_assigned,
                store_open=self._store_open,
                ollama_reachable=self._ollama_reachable,
                heuristic_mode=self._heuristic_mode,
            )

    def checks(self) -> dict[str, bool]:
        """The readiness checks of one snapshot."""
        return readiness_checks(self.snapshot())


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

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            self._reply(HTTPStatus.OK, encoder(self.server.metrics.registry), content_type)
        elif path == "/livez":
            self._reply(HTTPStatus.OK, b"ok\n", "text/plain; charset=utf-8")
        elif path == "/readyz":
            checks = self.server.health.checks()
            failing = sorted(name for name, passed in checks.items() if not passed)
            status = HTTPStatus.SERVICE_UNAVAILABLE if failing else HTTPStatus.OK
            body = orjson.dumps({"ready": not failing, "failing": failing, "checks": checks})
            self._reply(status, body, "application/json")
        else:
            self._reply(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")

    def _reply(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: probes and scrapes every few seconds would drown the service's own log lines."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], metrics: Exported, health: Readiness) -> None:
        self.metrics = metrics
        self.health = health
        super().__init__(address, _Handler)


def serve_http(host: str, port: int, metrics: Exported, health: Readiness) -> HttpEndpoint:
    """Start serving `/metrics`, `/livez` and `/readyz` on host:port (port 0 picks a free one)."""
    server = _Server((host, port), metrics, health)
    # A short poll keeps close() quick on shutdown; the idle wake-ups cost nothing measurable.
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="logagent-http", daemon=True
    )
    thread.start()
    return HttpEndpoint(server, thread)
