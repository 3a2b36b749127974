"""The shared-memory path: MemoryStore replicas on an s3:// URI served by a real moto_server."""

from __future__ import annotations

import json
import threading

import pytest

from store import MemoryConfig, MemoryStore, NewCase, OnnxEmbedder, RecallQuery, StorageConfig
from tests.conftest import create_bucket

pytestmark = pytest.mark.integration

NOW = 1_750_000_000.0
BUCKET = "logagent-memory"



@pytest.fixture(scope="module")
def s3_endpoint(moto_s3: str) -> str:
    """The session's S3 endpoint with this module's empty bucket."""
    create_bucket(moto_s3, BUCKET)
    return moto_s3


def replica(endpoint: str, embedder: OnnxEmbedder, prefix: str) -> MemoryStore:
    """One replica's MemoryStore on s3://bucket/prefix, configured as an operator would."""
    storage = StorageConfig(endpoint=endpoint, region="us-east-1", allow_http=True,
                            access_key_id="test", secret_access_key="test")
    return MemoryStore(MemoryConfig(uri=f"s3://{BUCKET}/{prefix}", storage=storage), embedder)


def case(memory_id: str, tenant: str = "acme", text: str = "") -> NewCase:
    """An NPE case of server orders at commit c1."""
    return NewCase(id=memory_id, server="orders", tenant=tenant, scope="prod", fingerprint=f"fp-{memory_id}",
                   exception_type="java.lang.NullPointerException",
                   error_text=text or f"NullPointerException at OrderService.place ({memory_id})",
                   analysis_json=json.dumps({"root_cause": f"customer null {memory_id}"}), analyzer="llm",
                   commit="c1", created_at=NOW)


def query(tenant: str = "acme") -> RecallQuery:
    """A recall for a new NPE in OrderService.place."""
    return RecallQuery(server="orders", tenant=tenant, scope="prod", fingerprint="fp-new",
                       exception_type="java.lang.NullPointerException", text="NPE in OrderService.place",
                       now=NOW + 60, identifiers=("OrderService", "place"), commit="c1")


class TestSharedMemoryOnS3:
    def test_remember_on_one_replica_recall_on_the_other(self, s3_endpoint: str,
                                                           embedder: OnnxEmbedder) -> None:
        """A case one replica stores is recallable by another, with a measured index lag."""
        first, second = (replica(s3_endpoint, embedder, "shared-1") for _ in range(2))
        result = first.remember(case("a"))
        assert result.inserted and result.index_lag_s > 0
        assert [c.memory_id for c in second.recall(query()).cases] == ["a"]
        assert second.recall(query(tenant="globex")).cases == []
        assert second.find_recurrence("orders", "acme", "fp-a", "c1", NOW + 60) is not None

    def test_feedback_on_one_replica_is_seen_by_the_other(self, s3_endpoint: str,
                                                          embedder: OnnxEmbedder) -> None:
        """A verdict applied through one replica changes what the other recalls."""
        first, second = (replica(s3_endpoint, embedder, "shared-2") for _ in range(2))
        first.remember(case("a"))
        assert second.feedback(None, "a", "correct")
        (recalled,) = first.recall(query()).cases
        assert recalled.trust == 1.0 and recalled.feedback == 1.0
        assert second.forget("a") == 1 and first.recall(query()).cases == []

    def test_replicas_writing_concurrently_lose_nothing(self, s3_endpoint: str,
                                                        embedder: OnnxEmbedder) -> None:
        """Two replicas remembering into the same new table at once keep every case."""
        replicas = [replica(s3_endpoint, embedder, "shared-3") for _ in range(2)]
        errors: list[BaseException] = []

        def write(store: MemoryStore, name: str) -> None:
            try:
                for i in range(6):
                    store.remember(case(f"{name}-{i}", text=f"error {name} {i} in OrderService.place"))
            except BaseException as exc:  # surfaced by the assertion below
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(store, name))
                   for store, name in zip(replicas, ("r1", "r2"), strict=True)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert errors == []
        stored = {c.memory_id for c in replicas[0].list_cases("orders", limit=100)}
        assert stored == {f"{n}-{i}" for n in ("r1", "r2") for i in range(6)}
