"""A scripted HTTP server that speaks Ollama's protocol, for driving the real langchain-ollama client.

Each `POST /api/chat` is recorded and answered by the next scripted `Reply` (or a callable that builds
one from the request body). Replies stream as NDJSON the way Ollama does: content and tool calls in
non-final chunks, then a `done: true` chunk carrying the token counts LangChain turns into
`usage_metadata`. `POST /api/embed`, `GET /api/tags` and `GET /` answer like Ollama too.

    with ScriptedOllama([Reply.tool_calls([("read_file", {"path": "a.py"})]), Reply.json({...})]) as server:
        ChatOllama(base_url=server.url, model="m").invoke("hi")
        assert "secret" not in server.all_text()
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Literal

from tests.protocol_server import LoopbackServer

Embedder = Callable[[str], Sequence[float]]
ReplyKind = Literal["text", "tool_calls", "http_error", "malformed", "delay", "drip"]
Handler = Callable[[dict[str, Any]], "Reply"]

_EPOCH_STAMP = "2025-01-01T00:00:00.000000Z"


@dataclass(frozen=True)
class Reply:
    """One scripted answer to a chat request. Build it with the class methods."""

    kind: ReplyKind
    content: str = ""
    calls: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    status: int = 200
    seconds: float = 0.0
    then: Reply | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    times: int = 1

    @classmethod
    def text(cls, content: str, *, prompt_tokens: int | None = None,
             completion_tokens: int | None = None) -> Reply:
        """Stream `content` as the assistant's message."""
        return cls("text", content=content, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)

    @classmethod
    def json(cls, obj: Any, *, prompt_tokens: int | None = None,
             completion_tokens: int | None = None) -> Reply:
        """Stream `obj` serialised as JSON text (what a model honouring `format` would say)."""
        return cls.text(json.dumps(obj), prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)

    @classmethod
    def tool_calls(cls, calls: Iterable[tuple[str, Mapping[str, Any]]], *, prompt_tokens: int | None = None,
                   completion_tokens: int | None = None) -> Reply:
        """Ask for tool calls, given as `(name, arguments)` pairs."""
        return cls("tool_calls", calls=tuple((name, dict(args)) for name, args in calls),
                   prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)

    @classmethod
    def delay(cls, seconds: float, then: Reply | None = None) -> Reply:
        """Wait `seconds` before answering with `then` (default: an empty text answer)."""
        return cls("delay", seconds=seconds, then=then or cls.text(""))

    @classmethod
    def http_error(cls, status: int = 500, message: str = "model runner crashed") -> Reply:
        """Answer with an HTTP error and Ollama's `{"error": ...}` body."""
        return cls("http_error", status=status, content=message)

    @classmethod
    def drip(cls, piece: str, times: int, every_s: float = 0.0) -> Reply:
        """Stream `piece` as the assistant's message `times` times, `every_s` apart (a slow or runaway model)."""
        return cls("drip", content=piece, times=times, seconds=every_s)

    @classmethod
    def malformed(cls) -> Reply:
        """Start a stream and then break it: a chunk that is not JSON."""
        return cls("malformed")


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request the server received; `body` is the parsed JSON (None when absent or broken)."""

    method: str
    path: str
    raw: str
    body: Any


@dataclass
class _State:
    script: list[Reply | Handler]
    requests: list[RecordedRequest] = field(default_factory=list)
    chat_calls: list[dict[str, Any]] = field(default_factory=list)
    unscripted: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)


def seeded_embedding(text: str, dim: int = 32) -> list[float]:
    """A deterministic unit vector derived from `text` (stands in for a real embedding model)."""
    values: list[float] = []
    counter = 0
    while len(values) < dim:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        values.extend((byte - 127.5) / 127.5 for byte in digest)
        counter += 1
    vector = values[:dim]
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


class ScriptedOllama:
    """An Ollama-protocol server on 127.0.0.1 (free port) answering chat requests from a script."""

    def __init__(self, script: Iterable[Reply | Handler] = (), *, embedder: Embedder = seeded_embedding,
                 models: Sequence[str] = ("qwen2.5-coder:7b",)) -> None:
        self._state = _State(script=list(script))
        self._embedder = embedder
        self._models = tuple(models)
        self._loopback: LoopbackServer | None = None

    # -- scripting and inspection -------------------------------------------------------------------

    def add(self, *replies: Reply | Handler) -> None:
        """Append replies to the script."""
        with self._state.lock:
            self._state.script.extend(replies)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in order (chat, embed, tags, ...)."""
        with self._state.lock:
            return list(self._state.requests)

    @property
    def chat_calls(self) -> list[dict[str, Any]]:
        """The JSON body of every chat request, in order: messages, tools, format, options."""
        with self._state.lock:
            return list(self._state.chat_calls)

    @property
    def unscripted(self) -> int:
        """Chat requests that arrived after the script ran out (answered with HTTP 500)."""
        with self._state.lock:
            return self._state.unscripted

    def all_text(self) -> str:
        """Every request body concatenated, to assert that something never reached the server."""
        return "\n".join(request.raw for request in self.requests)

    # -- lifecycle ----------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL to give `ChatOllama(base_url=...)`."""
        if self._loopback is None:
            raise RuntimeError("server not started")
        return self._loopback.url

    def start(self) -> ScriptedOllama:
        """Bind a free port and serve in a daemon thread."""
        state, embedder, models = self._state, self._embedder, self._models

        class _Bound(_OllamaHandler):
            pass

        _Bound.state, _Bound.embedder, _Bound.models = state, staticmethod(embedder), models
        self._loopback = LoopbackServer(_Bound, "scripted-ollama")
        return self

    def stop(self) -> None:
        """Stop serving; delayed replies still sleeping are woken and dropped."""
        self._state.stopping.set()
        if self._loopback is not None:
            self._loopback.close()

    def __enter__(self) -> ScriptedOllama:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _OllamaHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: _State
    embedder: Callable[..., Sequence[float]]
    models: tuple[str, ...]

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    # -- routing ------------------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._record("GET", "")
        if self.path == "/":
            self._send_bytes(200, b"Ollama is running", "text/plain; charset=utf-8")
        elif self.path == "/api/tags":
            tags = [{"name": m, "model": m, "modified_at": _EPOCH_STAMP, "size": 1, "digest": "0" * 64,
                     "details": {"format": "gguf", "family": "test"}} for m in self.models]
            self._send_json(200, {"models": tags})
        elif self.path == "/api/version":
            self._send_json(200, {"version": "0.12.0"})
        else:
            self._send_json(404, {"error": f"not found: {self.path}"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8", errors="replace")
        body = self._record("POST", raw)
        if self.path == "/api/chat" and isinstance(body, dict):
            self._chat(body)
        elif self.path == "/api/embed" and isinstance(body, dict):
            try:
                self._embed(body)
            except Exception as exc:  # a broken test embedder must answer, not hang
                self._send_json(500, {"error": f"embedder failed: {exc}"})
        else:
            self._send_json(404, {"error": f"not found: {self.path}"})

    def _record(self, method: str, raw: str) -> Any:
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = None
        with self.state.lock:
            self.state.requests.append(RecordedRequest(method, self.path, raw, body))
        return body

    # -- endpoints ----------------------------------------------------------------------------------

    def _embed(self, body: dict[str, Any]) -> None:
        inputs = body.get("input", "")
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        vectors = [list(self.embedder(str(text))) for text in texts]
        self._send_json(200, {"model": body.get("model", ""), "embeddings": vectors,
                              "total_duration": 1000, "load_duration": 0, "prompt_eval_count": len(texts)})

    def _chat(self, body: dict[str, Any]) -> None:
        with self.state.lock:
            self.state.chat_calls.append(body)
            step = self.state.script.pop(0) if self.state.script else None
            if step is None:
                self.state.unscripted += 1
        if step is None:
            self._send_json(500, {"error": "scripted server: no reply left in the script"})
            return
        reply = step if isinstance(step, Reply) else step(body)
        while reply.kind == "delay":
            if self.state.stopping.wait(reply.seconds):
                return
            reply = reply.then or Reply.text("")
        if reply.kind == "http_error":
            self._send_json(reply.status, {"error": reply.content})
        elif reply.kind == "drip":
            self._stream(body, self._dripped(body, reply))
        elif reply.kind == "malformed":
            self._stream(body, [b'{"model": "m", "message": {"role": "assistant", "content": "hal\n',
                                b"not json at all\n"])
        else:
            self._stream(body, _chunks(body, reply))

    # -- wire helpers -------------------------------------------------------------------------------

    def _send_bytes(self, status: int, payload: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _send_json(self, status: int, obj: Any) -> None:
        self._send_bytes(status, json.dumps(obj).encode(), "application/json; charset=utf-8")

    def _dripped(self, body: dict[str, Any], reply: Reply) -> Iterator[bytes]:
        first, *_ = _chunks(body, Reply.text(reply.content))
        for _ in range(reply.times):
            if self.state.stopping.wait(reply.seconds):
                return
            yield first
        yield _chunks(body, Reply.text(""))[-1]

    def _stream(self, body: dict[str, Any], lines: Iterable[bytes]) -> None:
        """Send NDJSON with chunked transfer encoding, one line per HTTP chunk, as Ollama does."""
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for line in lines:
                self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout); nothing left to tell it


def _chunks(body: dict[str, Any], reply: Reply) -> list[bytes]:
    """The NDJSON lines of one streamed chat answer."""
    model = str(body.get("model", ""))

    def line(obj: dict[str, Any]) -> bytes:
        return json.dumps(obj).encode() + b"\n"

    def message(**fields: Any) -> dict[str, Any]:
        return {"model": model, "created_at": _EPOCH_STAMP, "message": {"role": "assistant", **fields},
                "done": False}

    out: list[bytes] = []
    if reply.kind == "tool_calls":
        calls = [{"function": {"name": name, "arguments": dict(args)}} for name, args in reply.calls]
        out.append(line(message(content="", tool_calls=calls)))
    else:
        # Split the text over a few chunks so the client's aggregation is exercised.
        size = max(1, len(reply.content) // 3 + 1)
        out.extend(line(message(content=reply.content[i:i + size]))
                   for i in range(0, len(reply.content), size))
    prompt_chars = len(json.dumps(body.get("messages", [])))
    completion_chars = len(reply.content) + len(json.dumps([list(c) for c in reply.calls]))
    final = {
        "model": model, "created_at": _EPOCH_STAMP,
        "message": {"role": "assistant", "content": ""},
        "done": True, "done_reason": "stop",
        "total_duration": 5_000_000, "load_duration": 1_000, "prompt_eval_duration": 1_000_000,
        "eval_duration": 3_000_000,
        "prompt_eval_count": _or(reply.prompt_tokens, prompt_chars // 4 + 1),
        "eval_count": _or(reply.completion_tokens, completion_chars // 4 + 1),
    }
    out.append(line(final))
    return out


def _or(value: int | None, default: int) -> int:
    return default if value is None else value
