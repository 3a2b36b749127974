"""Recall's candidate read (`store.candidates`) on a real LanceDB: row addresses first, then one take."""

from __future__ import annotations

import json
from collections.abc import Coroutine
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import lancedb
import numpy as np
import pytest
from lancedb.background_loop import LOOP

from store import MemoryConfig, MemoryStore, NewCase, OnnxEmbedder
from store.candidates import CandidateSearch, candidate_rows
from store.scope import table_name
from store.table import RECALL_COLUMNS

pytestmark = pytest.mark.integration

T = TypeVar("T")
NOW = 1_750_000_000.0
WHERE = "tenant = 'acme' AND scope = 'prod'"
TEXTS = ("NullPointerException at com.acme.OrderService.place(OrderService.java:12)",
         "NullPointerException at com.acme.OrderService.cancel(OrderService.java:40)",
         "TimeoutError: payment gateway did not answer within 30s",
         "KeyError: 'customer' in orders/views.py line 88",
         "java.sql.SQLException: connection refused to db-primary:5432",
         "IndexOutOfBoundsException at com.acme.Cart.first(Cart.java:7)")


def _run(work: Coroutine[Any, Any, T]) -> T:
    result: T = LOOP.run(work)  # type: ignore[no-untyped-call]  # lancedb's loop is untyped
    return result


@pytest.fixture
def reader(tmp_path: Path, embedder: OnnxEmbedder) -> Any:
    """The async table of server `orders` holding six cases of tenant `acme` and one of another tenant."""
    memory = MemoryStore(MemoryConfig(uri=str(tmp_path / "memory")), embedder)
    for i, text in enumerate((*TEXTS, TEXTS[0])):
        memory.remember(NewCase(id=f"c{i}", server="orders", tenant="acme" if i < len(TEXTS) else "other",
                                scope="prod", fingerprint=f"fp{i % 3}", exception_type="E", error_text=text,
                                analysis_json=json.dumps({"root_cause": f"cause {i}"}), analyzer="llm",
                                commit="c1", created_at=NOW))
    db = _run(lancedb.connect_async(str(tmp_path / "memory"), read_consistency_interval=timedelta(0)))
    return _run(db.open_table(table_name("orders")))


def _search(embedder: OnnxEmbedder) -> CandidateSearch:
    (vector,) = embedder.embed(["NullPointerException in OrderService.place"])
    return CandidateSearch(vector, WHERE, "fp1", pool=3, matches=5, nprobes=10)


def _each_reading_its_columns(reader: Any, search: CandidateSearch) -> list[dict[str, Any]]:
    """What the two queries return when each reads the columns itself (recall's read before the take)."""
    nearest = (reader.vector_search(search.vector).distance_type("cosine").where(search.where)
               .nprobes(search.nprobes).select([*RECALL_COLUMNS, "_distance"]).limit(search.pool))
    exact = (reader.query().where(f"{search.where} AND fingerprint = '{search.fingerprint}'")
             .select(RECALL_COLUMNS).limit(search.matches))
    rows = [*_run(nearest.to_arrow()).to_pylist(), *_run(exact.to_arrow()).to_pylist()]
    return [{name: row[name] for name in RECALL_COLUMNS} for row in rows]


def _plain(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**row, "vector": np.asarray(row["vector"]).tolist()} for row in rows]


class _CompactedBeforeTake:
    """The real table, which forgets case `doomed` and compacts itself just before the take runs, as
    another replica's maintenance would: the row addresses found before then point nowhere."""

    def __init__(self, reader: Any, doomed: str) -> None:
        self._reader = reader
        self._doomed = doomed
        self.takes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)

    def take_row_ids(self, addresses: list[int]) -> Any:
        self.takes += 1
        return _LateTake(self._reader, addresses, self._doomed)


class _LateTake:
    def __init__(self, reader: Any, addresses: list[int], doomed: str) -> None:
        self._reader, self._addresses, self._doomed = reader, addresses, doomed
        self._columns: list[str] = []

    def with_row_id(self) -> _LateTake:
        return self

    def select(self, columns: list[str]) -> _LateTake:
        self._columns = columns
        return self

    async def to_arrow(self) -> Any:
        await self._reader.delete(f"id = '{self._doomed}'")
        await self._reader.optimize()
        return await self._reader.take_row_ids(self._addresses).with_row_id().select(self._columns).to_arrow()


class TestCandidateRows:
    def test_the_take_returns_what_each_query_reading_its_columns_returns(self, reader: Any,
                                                                          embedder: OnnxEmbedder) -> None:
        """Same rows, same order (nearest first, then the matches), a row both found twice, every column."""
        search = _search(embedder)
        rows = _run(candidate_rows(reader, search))
        expected = _each_reading_its_columns(reader, search)
        assert [row["id"] for row in rows] == [row["id"] for row in expected]
        assert len(rows) == 5 and rows[0]["id"] == "c0" and {"c1", "c4"} <= {row["id"] for row in rows[3:]}
        assert _plain(rows) == _plain(expected)
        assert all(row["tenant"] == "acme" for row in rows)

    def test_a_compaction_between_the_steps_reads_the_rows_again(self, reader: Any,
                                                                  embedder: OnnxEmbedder) -> None:
        """The addresses no longer hold after the compaction: the queries run again on the compacted table,
        the forgotten case is not among the rows, and nothing raises."""
        search = _search(embedder)
        moving = _CompactedBeforeTake(reader, doomed="c4")
        rows = _run(candidate_rows(moving, search))
        assert moving.takes == 1
        assert "c4" not in {row["id"] for row in rows}
        assert _plain(rows) == _plain(_each_reading_its_columns(reader, search))
        assert [row["id"] for row in rows][:1] == ["c0"]

    def test_no_row_passes_the_filter(self, reader: Any, embedder: OnnxEmbedder) -> None:
        """A tenant without cases gets no rows, and no take runs."""
        search = CandidateSearch(_search(embedder).vector, "tenant = 'nobody'", "fp1", pool=3, matches=5,
                                 nprobes=10)
        moving = _CompactedBeforeTake(reader, doomed="c0")
        assert _run(candidate_rows(moving, search)) == []
        assert moving.takes == 0
