"""The plumbing the protocol servers share (Slack, GitHub, GitLab, webhook receiver): a threaded HTTP
server on a free loopback port that records every request, and scripted faults that stand in for an API
having a bad moment.

A subclass answers `route(request)` with a `Response`; before it does, the first queued `Fault` whose
`matches` accepts the request answers instead (an HTTP status with headers), or cuts the connection
(`drop`), or lets the request take effect and then cuts the connection (`drop_after`: the write happened,
the client never hears of it).
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Literal
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Request:
    """One request as the server received it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    """Lower-cased names."""
    body: bytes

    def json(self) -> Any:
        """The body as JSON, or None when it is not."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None


@dataclass
class Response:
    """What a route answers."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, status: int, doc: Any, headers: Mapping[str, str] | None = None) -> Response:
        """A JSON answer."""
        return cls(status, json.dumps(doc).encode(), {"content-type": "application/json; charset=utf-8",
                                                      **(headers or {})})

    @classmethod
    def text(cls, status: int, text: str, headers: Mapping[str, str] | None = None) -> Response:
        """A plain-text answer."""
        return cls(status, text.encode(), {"content-type": "text/plain; charset=utf-8", **(headers or {})})


FaultKind = Literal["status", "drop", "drop_after"]


@dataclass(frozen=True)
class Fault:
    """One scripted misbehaviour, used once, for the first request `matches` accepts (default: any)."""

    kind: FaultKind
    response: Response | None = None
    matches: Callable[[Request], bool] = lambda request: True

    @classmethod
    def status(cls, status: int, body: str = "", headers: Mapping[str, str] | None = None, *,
               matches: Callable[[Request], bool] = lambda request: True) -> Fault:
        """Answer `status` instead of doing the work."""
        return cls("status", Response.text(status, body, headers), matches)

    @classmethod
    def drop(cls, *, matches: Callable[[Request], bool] = lambda request: True) -> Fault:
        """Close the connection without an answer, doing nothing."""
        return cls("drop", None, matches)

    @classmethod
    def drop_after(cls, *, matches: Callable[[Request], bool] = lambda request: True) -> Fault:
        """Do the work, then close the connection without an answer."""
        return cls("drop_after", None, matches)


class ProtocolServer:
    """Base of the protocol servers: lifecycle, recording, faults, an optional delay per request."""

    name: ClassVar[str] = "protocol-server"

    def __init__(self, *, delay_s: float = 0.0) -> None:
        self.lock = threading.RLock()
        self.requests: list[Request] = []
        self.faults: list[Fault] = []
        self.delay_s = delay_s
        self._loopback: LoopbackServer | None = None

    def route(self, request: Request) -> Response:
        """Answer one request (called under `self.lock`)."""
        raise NotImplementedError

    def inject(self, *faults: Fault) -> None:
        """Queue faults; each answers one matching request."""
        with self.lock:
            self.faults.extend(faults)

    def _take_fault(self, request: Request) -> Fault | None:
        with self.lock:
            for index, fault in enumerate(self.faults):
                if fault.matches(request):
                    return self.faults.pop(index)
        return None

    def answer(self, request: Request) -> Response | None:
        """The response to send, or None to cut the connection."""
        if self.delay_s:
            time.sleep(self.delay_s)
        fault = self._take_fault(request)
        with self.lock:
            self.requests.append(request)
            if fault is not None and fault.kind == "status":
                return fault.response
            if fault is not None and fault.kind == "drop":
                return None
            response = self.route(request)
        return None if fault is not None else response

    @property
    def url(self) -> str:
        """The base URL, `http://127.0.0.1:PORT`."""
        if self._loopback is None:
            raise RuntimeError("server not started")
        return self._loopback.url

    def start(self) -> ProtocolServer:
        """Bind a free port and serve in a daemon thread."""
        owner = self

        class _Bound(_Handler):
            server_owner = owner

        self._loopback = LoopbackServer(_Bound, self.name)
        return self

    def stop(self) -> None:
        """Stop serving."""
        if self._loopback is not None:
            self._loopback.close()

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1 (a free port), serving in a daemon thread until `close()`."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], name: str) -> None:
        self.server = _QuietServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=name, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT`."""
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        """Stop serving and release the port."""
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client killed mid-request (the crash tests do it on purpose) is no server error."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_owner: ClassVar[ProtocolServer]

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        query = {key: values[-1] for key, values in parse_qs(parts.query, keep_blank_values=True).items()}
        headers = {key.lower(): value for key, value in self.headers.items()}
        response = self.server_owner.answer(Request(self.command, parts.path, query, headers, body))
        if response is None:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)  # the client sees the connection cut, no answer
            return
        self.send_response(response.status)
        for key, value in response.headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        self.wfile.write(response.body)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve
