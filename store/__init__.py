"""Error memory: past analyses per server in LanceDB, ranked, scoped per tenant, fresh and correctable."""

from store.config import MemoryConfig, RankingConfig, StorageConfig, TrustWeights
from store.embedding import Embedder, OllamaEmbedder, OnnxEmbedder
from store.errors import EmbeddingUnavailable, IncompatibleEmbedding, RefusedCase, StoreError
from store.freshness import IsChanged
from store.memory import MemoryStore
from store.record import (
    CaseDetail,
    CaseSummary,
    CitedRange,
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
