"""Cassettes: a model's answers to one eval case, saved as JSON and replayed by the Ollama-protocol server.

A cassette is the list of assistant turns of one agent conversation: tool calls, or the final text.
`RecordingProxy` sits between the agent and a real Ollama, forwards every request unchanged and writes
down each `/api/chat` answer, so `--live` turns a real model's run into a cassette.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.ollama_server import Reply

CASSETTE_DIR = Path(__file__).parent / "cassettes"
_FORWARD_TIMEOUT_S = 600


@dataclass
class Cassette:
    """The assistant turns of one case; `source` says whether a model or a person wrote them."""

    case: str
    model: str
    source: str
    turns: list[dict[str, Any]] = field(default_factory=list)

    def replies(self) -> list[Reply]:
        """The turns as scripted replies for `ScriptedOllama`."""
        replies = []
        for turn in self.turns:
            if turn.get("tool_calls"):
                replies.append(Reply.tool_calls([(c["name"], c["arguments"]) for c in turn["tool_calls"]]))
            else:
                replies.append(Reply.text(str(turn.get("content", ""))))
        return replies

    def save(self, directory: Path = CASSETTE_DIR) -> Path:
        """Write the cassette as `<case>.json`."""
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.case}.json"
        body = {"case": self.case, "model": self.model, "source": self.source, "turns": self.turns}
        path.write_text(json.dumps(body, indent=2) + "\n")
        return path


def load(case: str, directory: Path = CASSETTE_DIR) -> Cassette | None:
    """The cassette of `case`, or None when none was recorded."""
    path = directory / f"{case}.json"
    if not path.is_file():
        return None
    body = json.loads(path.read_text())
    return Cassette(body["case"], body["model"], body["source"], list(body["turns"]))


def turn_from_stream(ndjson: bytes) -> dict[str, Any]:
    """One assistant turn assembled from Ollama's streamed chat chunks."""
    content: list[str] = []
    calls: list[dict[str, Any]] = []
    for line in ndjson.splitlines():
        if not line.strip():
            continue
        message = json.loads(line).get("message") or {}
        content.append(message.get("content") or "")
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            calls.append({"name": function.get("name", ""), "arguments": function.get("arguments") or {}})
    return {"tool_calls": calls} if calls else {"content": "".join(content)}


class RecordingProxy:
    """An HTTP proxy to a real Ollama that notes every chat answer; use as a context manager."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.turns: list[dict[str, Any]] = []
        proxy = self

        class _Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self._forward(self.rfile.read(length))

            def _forward(self, body: bytes | None) -> None:
                request = urllib.request.Request(  # noqa: S310 - the operator's own Ollama URL
                    proxy.upstream + self.path, data=body, method=self.command,
                    headers={"Content-Type": self.headers.get("Content-Type", "application/json")})
                try:
                    with urllib.request.urlopen(request, timeout=_FORWARD_TIMEOUT_S) as response:  # noqa: S310
                        status, payload = response.status, response.read()
                        content_type = response.headers.get("Content-Type", "application/json")
                except urllib.error.HTTPError as error:
                    status, payload, content_type = error.code, error.read(), "application/json"
                if self.path.startswith("/api/chat") and status == 200:
                    proxy.turns.append(turn_from_stream(payload))
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Base URL the agent should use instead of the real Ollama."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def answer_turn(answer: Mapping[str, Any]) -> dict[str, Any]:
    """A final-answer turn holding `answer` as the JSON text a model honouring `format` writes."""
    return {"content": json.dumps(answer)}
