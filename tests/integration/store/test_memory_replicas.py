"""Replicas writing one memory at once, on a local directory and on s3:// (a real moto_server).

Each writer is a replica's own MemoryStore, with its own LanceDB connection and table handles; the
writers run in threads released together by a barrier, so their commits interleave (LanceDB does its
I/O outside the GIL). Threads rather than processes keep the test at a few seconds: a process spends
longer importing LanceDB than writing.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lancedb
import pyarrow as pa
import pytest

from store import MemoryConfig, MemoryStore, NewCase, OnnxEmbedder, StorageConfig
from store.record import Verdict
from store.table import memory_schema
from store.verdicts import verdict_schema, verdict_table
from tests.conftest import create_bucket

pytestmark = pytest.mark.integration

NOW = 1_750_000_000.0
BUCKET = "logagent-replicas"

@dataclass(frozen=True)
class Backend:
    """Where the replicas' shared memory lives, and how many verdicts each writer gives there."""

    config: MemoryConfig
    writes: int
    """How many verdicts or cases each writer writes (fewer on S3, where every commit is a few requests)."""


BackendFactory = Callable[[str], Backend]


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BackendFactory]:
    """A fresh shared memory per call: a temp directory, or a prefix of a bucket on moto_server."""
    if request.param == "local":
        yield lambda name: Backend(MemoryConfig(uri=str(tmp_path / name)), 24)
        return
    endpoint: str = request.getfixturevalue("moto_s3")
    create_bucket(endpoint, BUCKET)
    storage = StorageConfig(endpoint=endpoint, region="us-east-1", allow_http=True, access_key_id="test",
                            secret_access_key="test")
    prefix = f"{request.node.name}-{time.monotonic_ns()}"
    yield lambda name: Backend(MemoryConfig(uri=f"s3://{BUCKET}/{prefix}/{name}", storage=storage), 6)


def case(memory_id: str, **overrides: Any) -> NewCase:
    """An llm case of server orders, tenant acme, at commit c1 (trust 0.7 until someone judges it)."""
    return NewCase(**{
        "id": memory_id, "server": "orders", "tenant": "acme", "scope": "prod", "fingerprint": "fp-npe",
        "exception_type": "java.lang.NullPointerException",
        "error_text": f"NullPointerException at OrderService.place ({memory_id})",
        "analysis_json": json.dumps({"root_cause": f"customer is null ({memory_id})"}), "analyzer": "llm",
        "commit": "c1", "created_at": NOW,
    } | overrides)


@dataclass(frozen=True)
class Plan:
    """What one replica writes: cases to remember, then verdicts (case id, verdict, note)."""

    remember: tuple[NewCase, ...] = ()
    verdicts: tuple[tuple[str, Verdict, str], ...] = ()


def run_writers(config: MemoryConfig, embedder: OnnxEmbedder, plans: list[Plan]) -> list[int]:
    """Run each plan on a replica of its own, all at once; how many cases each replica inserted."""
    replicas = [MemoryStore(config, embedder) for _ in plans]
    start = threading.Barrier(len(plans))
    inserted = [0] * len(plans)
    errors: list[BaseException] = []

    def write(index: int) -> None:
        memory, plan = replicas[index], plans[index]
        try:
            memory.open()
            start.wait(timeout=30)
            inserted[index] = sum(memory.remember(case).inserted for case in plan.remember)
            for memory_id, verdict, note in plan.verdicts:
                assert memory.feedback("orders", memory_id, verdict, note), memory_id
        except BaseException as error:  # re-raised by the assertion below
            errors.append(error)
            start.abort()

    threads = [threading.Thread(target=write, args=(index,)) for index in range(len(plans))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    assert errors == []
    return inserted


def verdict_plan(writer: str, count: int) -> Plan:
    """`count` verdicts, two in three on case `shared` and the others on `other`: mostly wrong (each halves
    trust), every fifth correct."""
    return Plan(verdicts=tuple(("other" if i % 3 == 2 else "shared", "correct" if i % 5 == 0 else "wrong",
                                f"{writer}-{i}") for i in range(count)))


class TestConcurrentVerdicts:
    def test_no_verdict_is_lost_and_each_history_adds_up(self, backend: BackendFactory,
                                                         embedder: OnnxEmbedder) -> None:
        """Two replicas judging the same cases at once: every verdict is in the case's log, the case's
        feedback is the net of the verdicts given, and its trust and `memory show` history are the
        fold of its log in time order, from the trust the analyzer gave it."""
        shared = backend("memory")
        memory = MemoryStore(shared.config, embedder)
        ids = ["shared", "other"]
        for memory_id in ids:
            memory.remember(case(memory_id))
        plans = {writer: verdict_plan(writer, shared.writes) for writer in ("p", "q")}
        run_writers(shared.config, embedder, list(plans.values()))
        given = Counter((memory_id, verdict) for plan in plans.values() for memory_id, verdict, _ in plan.verdicts)
        weights = shared.config.trust
        lost, wrong_history, wrong_rows = 0, 0, 0
        for memory_id in ids:
            detail = memory.show(memory_id, NOW)
            assert detail is not None
            net = given[memory_id, "correct"] - given[memory_id, "wrong"]
            lost += abs(int(detail.summary.feedback) - net)
            assert len(detail.verdicts) == given[memory_id, "correct"] + given[memory_id, "wrong"]
            trust = unreviewed = weights.llm
            for verdict in detail.verdicts:  # the log's own order: oldest first
                after = weights.human if verdict.verdict == "correct" else min(trust, unreviewed) * weights.wrong_factor
                wrong_history += (verdict.trust_before, verdict.trust_after) != pytest.approx((trust, after))
                trust = after
            wrong_rows += detail.summary.trust != pytest.approx(trust)
            assert detail.trust_history[-1].trust == pytest.approx(detail.summary.trust)
            assert detail.summary.note == detail.verdicts[-1].note
        total = sum(given.values())
        assert (lost, wrong_history, wrong_rows) == (0, 0, 0), (
            f"of {total} verdicts: {lost} lost from feedback, {wrong_history} with a wrong trust history, "
            f"{wrong_rows} of {len(ids)} cases whose trust is not the fold of their log")


class TestConcurrentRemember:
    def test_a_replayed_analysis_is_stored_once_and_recurrences_agree(self, backend: BackendFactory,
                                                                      embedder: OnnxEmbedder) -> None:
        """Two replicas storing the same analyses at once (a replay: same ids) keep one row per id, and
        exactly one of them reports each as inserted. Two bursts of one failure analysed at once on
        different replicas are both kept; every replica then answers the next burst from the same case,
        and from the other one once a person marks it wrong."""
        shared = backend("memory")
        first, second = MemoryStore(shared.config, embedder), MemoryStore(shared.config, embedder)
        first.remember(case("seed", fingerprint="fp-seed"))  # the table exists: the writers only insert
        count = shared.writes
        replayed = tuple(case(f"replay-{i}", fingerprint=f"fp-{i}", error_text=f"error {i} in OrderService")
                         for i in range(count))
        inserted = run_writers(shared.config, embedder, [
            Plan(remember=(*replayed, case(f"{writer}-burst", fingerprint="fp-shared"))) for writer in ("p", "q")])
        stored = Counter(c.memory_id for c in first.list_cases("orders", limit=10 * count))
        duplicated = sorted(memory_id for memory_id, rows in stored.items() if rows > 1)
        assert duplicated == [], f"{len(duplicated)} of {count} replayed analyses stored twice"
        assert set(stored) == {"seed", "p-burst", "q-burst"} | {f"replay-{i}" for i in range(count)}
        assert sum(inserted) == count + 2
        found = [memory.find_recurrence("orders", "acme", "fp-shared", "c1", NOW + 60) for memory in (first, second)]
        assert found[0] is not None and found[1] is not None
        assert found[0].memory_id == found[1].memory_id
        assert second.feedback("orders", found[0].memory_id, "wrong")
        after = [memory.find_recurrence("orders", "acme", "fp-shared", "c1", NOW + 60) for memory in (first, second)]
        assert {c.memory_id for c in after if c is not None} == {"p-burst", "q-burst"} - {found[0].memory_id}
        assert after[0] is not None and after[1] is not None

    def test_a_table_made_before_the_key_was_declared_gets_it(self, tmp_path: Path,
                                                               embedder: OnnxEmbedder) -> None:
        """A memory table created without `id` declared its key is declared on the first write, so a
        replay racing on it is stored once too."""
        config = MemoryConfig(uri=str(tmp_path / "memory"))
        schema = memory_schema(embedder.dim, embedder.name)
        unkeyed = schema.set(0, schema.field("id").remove_metadata())
        lancedb.connect(config.uri).create_table("memory_orders", schema=unkeyed)
        replayed = tuple(case(f"replay-{i}", fingerprint=f"fp-{i}") for i in range(24))
        inserted = run_writers(config, embedder, [Plan(remember=replayed), Plan(remember=replayed)])
        stored = Counter(c.memory_id for c in MemoryStore(config, embedder).list_cases("orders", limit=100))
        assert stored == Counter({f"replay-{i}": 1 for i in range(24)})
        assert sum(inserted) == 24

    def test_a_verdict_log_made_before_verdicts_had_ids_gets_the_column(self, tmp_path: Path,
                                                                        embedder: OnnxEmbedder) -> None:
        """An older log (no `verdict_id` column) takes the column on its next append; its old entry still
        counts, and a verdict given twice under one id counts once."""
        config = MemoryConfig(uri=str(tmp_path / "memory"))
        memory = MemoryStore(config, embedder)
        memory.remember(case("judged"))
        old = pa.schema([f for f in verdict_schema() if f.name != "verdict_id"])
        lancedb.connect(config.uri).create_table(verdict_table("memory_orders"), data=pa.Table.from_pylist(
            [{"memory_id": "judged", "at": NOW, "verdict": "wrong", "note": "old", "trust_before": 0.7,
              "trust_after": 0.35}], schema=old))
        for _ in range(2):
            assert memory.feedback("orders", "judged", "wrong", "again", verdict_id="orders-feedback:0:9:1")
        detail = memory.show("judged", NOW, server="orders")
        assert detail is not None
        assert [v.note for v in detail.verdicts] == ["old", "again"]
        judged = next(c for c in memory.list_cases("orders") if c.memory_id == "judged")
        assert judged.feedback == -2.0
