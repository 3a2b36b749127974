"""The embedder the settings choose for the error memory.

Its own module so that `logagent memory` and `logagent feedback` open the memory without importing the
explainer, and with it langchain and the agent: about a second and a half of start-up they never use.
"""

from __future__ import annotations

from consumer.settings import Settings
from store import Embedder, OllamaEmbedder, OnnxEmbedder

__all__ = ["build_embedder"]


def build_embedder(settings: Settings) -> Embedder:
    """Ollama's /api/embed when configured, else the embedded ONNX sentence model."""
    memory = settings.memory
    if memory.embedder == "ollama":
        url = settings.ollama.url or memory.ollama_url
        return OllamaEmbedder(url, memory.ollama_model, memory.ollama_timeout_s)
    return OnnxEmbedder()
