"""Memory benchmark: insert and filtered recall in LanceDB (through MemoryStore) against ChromaDB.

Both stores get the same clustered 384-d vectors, ten tenants per server (so the tenant filter keeps
10% of the rows) and the same queries. LanceDB is populated in bulk with the store's own row format,
then `maintain()` builds whatever index the service would build at that size. Measured per size:
insert latency of one more case (`MemoryStore.remember` vs `collection.add`), filtered top-10 search
latency and recall@10 against exact search, and the latency of the product's whole `recall()`.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import orjson
import pyarrow as pa

from bench.stats import Latency, latency
from store import CitedRange, MemoryConfig, MemoryStore, NewCase, RecallQuery
from store.scope import scope_filter, table_name
from store.table import case_row, memory_schema

DIM = 384
TENANTS = 10
SERVER = "bench-server"
SCOPE = "service"
_NOW = 1_750_000_000.0


class LookupEmbedder:
    """An Embedder whose vector for a text was fixed in advance (speed runs cannot afford the model)."""

    name = "bench:clustered-384"
    dim = DIM

    def __init__(self) -> None:
        self.vectors: dict[str, list[float]] = {}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The registered vector of each text."""
        return [self.vectors[text] for text in texts]


@dataclass(frozen=True)
class MemoryResult:
    """Figures of one size."""

    rows: int
    lance_insert: Latency
    chroma_insert: Latency
    lance_search: Latency
    chroma_search: Latency
    lance_recall_at_10: float
    chroma_recall_at_10: float
    store_recall: Latency
    indexed: bool
    index_build_s: float

    def line(self) -> str:
        """One human-readable line."""
        ratio = self.chroma_search.p50 / self.lance_search.p50
        return (f"{self.rows // 1000}k rows: recall p50 {self.lance_search.p50_ms:.1f} ms / p99 "
                f"{self.lance_search.p99_ms:.1f} ms recall@10 {self.lance_recall_at_10:.2f} "
                f"= {ratio:.1f}x chromadb (p50 {self.chroma_search.p50_ms:.1f} ms, recall@10 "
                f"{self.chroma_recall_at_10:.2f}); store.recall p50 {self.store_recall.p50_ms:.1f} ms; "
                f"insert p50 {self.lance_insert.p50_ms:.1f} ms vs {self.chroma_insert.p50_ms:.1f} ms"
                f"{'; IVF index' if self.indexed else ''}")


def clustered(rng: np.random.Generator, count: int, centers: np.ndarray) -> np.ndarray:
    """`count` unit vectors scattered around random `centers` (errors come in families)."""
    picks = rng.integers(0, len(centers), size=count)
    vectors = centers[picks] + rng.normal(0.0, 0.35, size=(count, DIM)).astype(np.float32)
    normalised: np.ndarray = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return normalised.astype(np.float32)


def exact_top10(data: np.ndarray, tenants: np.ndarray, query: np.ndarray, tenant: int) -> set[int]:
    """Row numbers of the 10 nearest rows of `tenant` by cosine, by brute force."""
    rows = np.flatnonzero(tenants == tenant)
    scores = data[rows] @ query
    return {int(rows[i]) for i in np.argsort(-scores)[:10]}


def run(rows: int, queries: int = 100, inserts: int = 50, seed: int = 11,
        store_queries: int = 30) -> MemoryResult:
    """Build both stores at `rows` rows and measure them on the same queries."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(0.0, 1.0, size=(max(20, rows // 200), DIM)).astype(np.float32)
    data = clustered(rng, rows, centers)
    tenants = rng.integers(0, TENANTS, size=rows)
    query_vectors = clustered(rng, queries, centers)
    query_tenants = rng.integers(0, TENANTS, size=queries)
    extra = clustered(rng, inserts, centers)
    truth = [exact_top10(data, tenants, query_vectors[i], int(query_tenants[i])) for i in range(queries)]
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        lance = _lance(Path(tmp) / "lance", data, tenants, query_vectors, query_tenants, extra, truth,
                       store_queries)
        chroma = _chroma(Path(tmp) / "chroma", data, tenants, query_vectors, query_tenants, extra, truth)
    return MemoryResult(rows, lance["insert"], chroma["insert"], lance["search"], chroma["search"],
                        lance["recall"], chroma["recall"], lance["store_recall"], lance["indexed"],
                        lance["index_s"])


def _case(i: int, tenant: int) -> NewCase:
    """A case the size of a real one: a trace excerpt, an analysis of about 1 kB and two citations."""
    module = f"com.acme.orders.service{i % 37}"
    error_text = (f"java.lang.IllegalStateException: order {i} has no customer\n"
                  + "".join(f"\tat {module}.Handler{j}.handle(Handler{j}.java:{40 + j})\n" for j in range(6)))
    analysis = {"root_cause": f"Handler{i % 6} reads the customer before it is loaded (case {i})",
                "culprit": {"path": f"src/main/java/{module.replace('.', '/')}/Handler{i % 6}.java",
                            "line": 40 + i % 6, "function": "handle"},
                "explanation": "The order is built from the request before the customer lookup returns, "
                               "so the customer field is still null when the handler validates it. " * 6,
                "suggested_fix": "Wait for the customer lookup before validating the order."}
    cited = tuple(CitedRange(f"src/main/java/{module.replace('.', '/')}/Handler{j}.java", 30, 50, f"{i:040x}")
                  for j in range(2))
    return NewCase(id=f"case-{i}", server=SERVER, tenant=f"t{tenant}", scope=SCOPE, fingerprint=f"fp{i % 997}",
                   exception_type="java.lang.IllegalStateException", error_text=error_text,
                   analysis_json=orjson.dumps(analysis).decode(), analyzer="heuristic", commit="c0",
                   created_at=_NOW - 3600.0, cited_files=cited, status="heuristic")


def _lance(path: Path, data: np.ndarray, tenants: np.ndarray, queries: np.ndarray, query_tenants: np.ndarray,
           extra: np.ndarray, truth: list[set[int]], store_queries: int) -> dict[str, Any]:
    config = MemoryConfig(uri=str(path))
    embedder = LookupEmbedder()
    store = MemoryStore(config, embedder)
    db = lancedb.connect(str(path))
    schema = memory_schema(DIM, embedder.name)
    table: Any = db.create_table(table_name(SERVER), schema=schema)  # LanceDB is only partly typed
    ttl = config.ttl_for(SCOPE)
    for start in range(0, len(data), 20_000):
        stop = min(len(data), start + 20_000)
        meta = [case_row(_case(i, int(tenants[i])), trust=0.4, expires_at=_NOW - 3600.0 + ttl, vector=[])
                for i in range(start, stop)]
        for row in meta:
            del row["vector"]
        batch = pa.Table.from_pylist(meta, schema=pa.schema([f for f in schema if f.name != "vector"]))
        vectors = pa.FixedSizeListArray.from_arrays(pa.array(data[start:stop].reshape(-1)), DIM)
        table.add(batch.append_column(schema.field("vector"), vectors))
    insert_times = []
    for j, vector in enumerate(extra):
        case = _case(len(data) + j, TENANTS)  # a tenant no query asks for: the exact answers stay exact
        embedder.vectors[case.error_text] = vector.tolist()
        t0 = time.perf_counter()
        store.remember(case)
        insert_times.append(time.perf_counter() - t0)
    # The service compacts and indexes in maintain(); measure recall in that steady state.
    started = time.perf_counter()
    report = store.maintain(_NOW)
    index_s = time.perf_counter() - started
    table = db.open_table(table_name(SERVER))
    search_times, recalls, store_times = [], [], []
    for i, vector in enumerate(queries):
        tenant = f"t{int(query_tenants[i])}"
        # The pre-filter and probes of the store's recall (expiry and server are checked after it).
        where = scope_filter(server=None, tenant=tenant, scope=SCOPE, now=None)
        t0 = time.perf_counter()
        found = (table.search(vector).distance_type("cosine").where(where, prefilter=True)
                 .nprobes(config.nprobes).select(["id", "_distance"]).limit(10).to_list())
        search_times.append(time.perf_counter() - t0)
        ids = {int(str(row["id"]).split("-")[1]) for row in found}
        recalls.append(len(ids & truth[i]) / 10)
        if i >= store_queries:
            continue
        text = f"query {i}"
        embedder.vectors[text] = vector.tolist()
        query = RecallQuery(server=SERVER, tenant=tenant, scope=SCOPE, fingerprint=f"fp{i}",
                            exception_type="java.lang.IllegalStateException", text=text, now=_NOW)
        t0 = time.perf_counter()
        store.recall(query)
        store_times.append(time.perf_counter() - t0)
    return {"insert": latency(insert_times), "search": latency(search_times),
            "recall": float(np.mean(recalls)), "store_recall": latency(store_times),
            "indexed": bool(report.indexed), "index_s": index_s}


def _chroma(path: Path, data: np.ndarray, tenants: np.ndarray, queries: np.ndarray, query_tenants: np.ndarray,
            extra: np.ndarray, truth: list[set[int]]) -> dict[str, Any]:
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    collection = client.create_collection("memory", metadata={"hnsw:space": "cosine"})
    batch = client.get_max_batch_size()
    for start in range(0, len(data), batch):
        stop = min(len(data), start + batch)
        metadatas: list[Mapping[str, Any]] = [{"tenant": f"t{int(tenants[i])}", "server": SERVER}
                                              for i in range(start, stop)]
        collection.add(ids=[f"case-{i}" for i in range(start, stop)], embeddings=data[start:stop],
                       metadatas=metadatas)
    insert_times = []
    for j, vector in enumerate(extra):
        t0 = time.perf_counter()
        collection.add(ids=[f"case-{len(data) + j}"], embeddings=[vector],
                       metadatas=[{"tenant": f"t{TENANTS}", "server": SERVER}])
        insert_times.append(time.perf_counter() - t0)
    search_times, recalls = [], []
    for i, vector in enumerate(queries):
        t0 = time.perf_counter()
        found = collection.query(query_embeddings=[vector], n_results=10,
                                 where={"tenant": f"t{int(query_tenants[i])}"}, include=["distances"])
        search_times.append(time.perf_counter() - t0)
        ids = {int(x.split("-")[1]) for x in found["ids"][0]}
        recalls.append(len(ids & truth[i]) / 10)
    return {"insert": latency(insert_times), "search": latency(search_times),
            "recall": float(np.mean(recalls))}


def bench(quick: bool) -> str:
    """The one-line result; quick runs 1k and 10k rows, full adds 100k."""
    sizes = (1_000, 10_000) if quick else (1_000, 10_000, 100_000)
    results = [run(rows, queries=60 if quick else 300, inserts=20 if quick else 100,
                   store_queries=20 if quick else 100) for rows in sizes]
    return "memory: " + "; ".join(r.line() for r in results)
