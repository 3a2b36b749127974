"""Embedders: the real offline ONNX sentence model, and the Ollama client against a scripted /api/embed."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from store import Embedder, EmbeddingUnavailable, OllamaEmbedder, OnnxEmbedder
from store.relevance import cosine

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def onnx() -> OnnxEmbedder:
    """The real offline embedder, loaded once for the module."""
    return OnnxEmbedder()


class TestOnnxEmbedder:
    def test_vectors_are_384_d_unit_length_and_follow_the_protocol(self, onnx: OnnxEmbedder) -> None:
        """One unit-length 384-d vector per text, in order."""
        vectors = onnx.embed(["first text", "second text", ""])
        assert isinstance(onnx, Embedder) and onnx.dim == 384
        assert [len(v) for v in vectors] == [384, 384, 384]
        assert all(math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, rel_tol=1e-4) for v in vectors)

    def test_semantically_close_sentences_score_higher(self, onnx: OnnxEmbedder) -> None:
        """A paraphrase is closer than an unrelated sentence: it is a real sentence embedding."""
        anchor, paraphrase, unrelated = onnx.embed([
            "The database connection pool is exhausted, requests time out",
            "Requests are timing out because no database connections are left in the pool",
            "My grandmother bakes apple pie every Sunday afternoon",
        ])
        assert cosine(anchor, paraphrase) > 0.6 > 0.2 > cosine(anchor, unrelated)

    def test_batching_does_not_change_vectors(self) -> None:
        """A text embeds the same alone and inside a padded batch of longer texts."""
        small_batches = OnnxEmbedder(batch_size=2)
        texts = ["short", "a much longer sentence about a NullPointerException in OrderService", "x y z"]
        batched = small_batches.embed(texts)
        alone = [small_batches.embed([t])[0] for t in texts]
        for one, other in zip(batched, alone, strict=True):
            assert cosine(one, other) > 0.9999

    def test_long_text_is_truncated_to_256_tokens(self, onnx: OnnxEmbedder) -> None:
        """Text past the 256-token window does not change the vector (and does not fail)."""
        head = " ".join(f"word{i}" for i in range(400))
        first, second = onnx.embed([head + " apples", head + " completely different ending"])
        assert cosine(first, second) > 0.99999


class _ScriptedOllama(BaseHTTPRequestHandler):
    """Speaks Ollama's /api/embed: 4-d vectors derived from each input's length, or a scripted fault."""

    requests: list[dict[str, Any]] = []  # noqa: RUF012 - shared log of what the client sent
    mode = "ok"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "body": body})
        if self.mode == "error":
            self._send(500, b'{"error": "model not loaded"}')
        elif self.mode == "garbage":
            self._send(200, b"not json")
        else:
            vectors = [[float(len(t)), 1.0, 0.0, 0.5] for t in body["input"]]
            self._send(200, json.dumps({"model": body["model"], "embeddings": vectors}).encode())

    def _send(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def ollama() -> Iterator[str]:
    """A scripted Ollama on a free loopback port; yields its base URL."""
    _ScriptedOllama.requests = []
    _ScriptedOllama.mode = "ok"
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ScriptedOllama)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class TestOllamaEmbedder:
    def test_posts_model_and_inputs_and_reads_embeddings(self, ollama: str) -> None:
        """The client sends {model, input} to /api/embed and returns the embeddings in order."""
        embedder = OllamaEmbedder(ollama, "all-minilm", timeout=5)
        assert embedder.embed(["ab", "abcd"]) == [[2.0, 1.0, 0.0, 0.5], [4.0, 1.0, 0.0, 0.5]]
        assert _ScriptedOllama.requests == [
            {"path": "/api/embed", "body": {"model": "all-minilm", "input": ["ab", "abcd"]}}]
        assert embedder.name == "ollama:all-minilm" and embedder.dim == 4

    def test_dimension_is_probed_once_when_not_configured(self, ollama: str) -> None:
        """Asking for dim before any embedding asks the server once."""
        embedder = OllamaEmbedder(ollama + "/", "all-minilm")
        assert embedder.dim == 4 and embedder.dim == 4
        assert len(_ScriptedOllama.requests) == 1

    @pytest.mark.parametrize("mode", ["error", "garbage"])
    def test_server_faults_are_retriable_unavailability(self, ollama: str, mode: str) -> None:
        """A 500 or a non-JSON answer raises the retriable EmbeddingUnavailable."""
        _ScriptedOllama.mode = mode
        with pytest.raises(EmbeddingUnavailable) as raised:
            OllamaEmbedder(ollama, "all-minilm").embed(["x"])
        assert raised.value.retriable

    def test_unreachable_server_is_retriable_unavailability(self) -> None:
        """Nothing listening: EmbeddingUnavailable, not a raw transport error."""
        embedder = OllamaEmbedder("http://127.0.0.1:9", "all-minilm", timeout=2)
        with pytest.raises(EmbeddingUnavailable):
            embedder.embed(["x"])
