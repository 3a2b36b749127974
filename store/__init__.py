"""Error memory: past analyses per server in LanceDB, ranked, scoped per tenant, fresh and correctable.

`MemoryStore` and the embedders load LanceDB, numpy and the HTTP client on first use, not on import:
the settings import this package, and commands that never open the memory (`logagent fingerprint`)
should not pay for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from store.config import MemoryConfig, RankingConfig, StorageConfig, TrustWeights
from store.errors import EmbeddingUnavailable, IncompatibleEmbedding, RefusedCase, StoreError
from store.freshness import IsChanged
from store.record import (
    CaseDetail,
    CaseSummary,
    CitedRange,
    Judged,
    MaintenanceReport,
    NewCase,
    PastCase,
    RecallQuery,
    RecallResult,
    RememberResult,
    ServerSummary,
    TrustPoint,
    VerdictEntry,
)

__all__ = [
    "CaseDetail",
    "CaseSummary",
    "CitedRange",
    "Embedder",
    "EmbeddingUnavailable",
    "IncompatibleEmbedding",
    "IsChanged",
    "Judged",
    "MaintenanceReport",
    "MemoryConfig",
    "MemoryStore",
    "NewCase",
    "OllamaEmbedder",
    "OnnxEmbedder",
    "PastCase",
    "RankingConfig",
    "RecallQuery",
    "RecallResult",
    "RefusedCase",
    "RememberResult",
    "ServerSummary",
    "StorageConfig",
    "StoreError",
    "TrustPoint",
    "TrustWeights",
    "VerdictEntry",
]

if TYPE_CHECKING:
    from store.embedding import Embedder, OllamaEmbedder, OnnxEmbedder
    from store.memory import MemoryStore

_LAZY = {"Embedder": "store.embedding", "OllamaEmbedder": "store.embedding", "OnnxEmbedder": "store.embedding",
         "MemoryStore": "store.memory"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'store' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
