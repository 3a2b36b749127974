"""Recall's candidate rows: find where the nearest cases and the exact-fingerprint matches are, then read
the columns of them all at once.

Each LanceDB read of columns has a cost of its own (threads woken, pages decoded) besides its rows: the
vector search reading recall's 18 columns and the fingerprint lookup reading them again cost 6-15% more
CPU than the two finding row addresses only and one take reading the columns (100k rows, A/B runs of
bench/memory.py). A row address holds until compaction moves its row; when the take misses one (a
compaction or a delete between the two steps), both queries run again and read the columns themselves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from store.scope import sql_string
from store.table import RECALL_COLUMNS, arrow_to_rows

__all__ = ["CandidateSearch", "candidate_rows"]

_ROW_ID = "_rowid"


@dataclass(frozen=True, slots=True)
class CandidateSearch:
    """The `pool` nearest rows to `vector` passing `where`, plus up to `matches` rows passing it with this
    `fingerprint` (none when it is empty)."""

    vector: list[float]
    where: str
    fingerprint: str
    pool: int
    matches: int
    nprobes: int


async def candidate_rows(reader: Any, search: CandidateSearch) -> list[dict[str, Any]]:
    """The rows of `search`, nearest first, then the fingerprint matches (a row both found comes twice),
    read through the async table `reader`."""
    found = await asyncio.gather(*_queries(reader, search, columns=None))
    # In the order the queries found them (nearest first, then the matches), as each query reading
    # its own columns returns them: ranking then sees exactly the same list.
    addresses = [address for result in found for address in result[_ROW_ID].to_pylist()]
    if not addresses:
        return []
    unique = sorted(set(addresses))
    taken = await reader.take_row_ids(unique).with_row_id().select(RECALL_COLUMNS).to_arrow()
    if taken[_ROW_ID].to_pylist() == unique:  # the take returns rows in address order
        rows = dict(zip(unique, arrow_to_rows(taken.drop_columns([_ROW_ID])), strict=True))
        return [rows[address] for address in addresses]
    whole = await asyncio.gather(*_queries(reader, search, columns=RECALL_COLUMNS))
    return [row for result in whole for row in arrow_to_rows(result.select(RECALL_COLUMNS))]


def _queries(reader: Any, search: CandidateSearch, columns: list[str] | None) -> list[Coroutine[Any, Any, Any]]:
    """The vector search and the fingerprint lookup, reading `columns`, or row addresses only (None)."""
    # The where clause of a vector search pre-filters (the async API's default); its distance is not used
    # (ranking takes cosines of the vectors), but LanceDB warns on every search that leaves it out.
    nearest = (reader.vector_search(search.vector).distance_type("cosine").where(search.where)
               .nprobes(search.nprobes).limit(search.pool))
    queries = [nearest.select([*columns, "_distance"]) if columns else nearest.with_row_id().select(["_distance"])]
    # Exact fingerprint matches join the pool even when embeddings miss them: a B-tree lookup, run
    # alongside the vector search so the recall waits for the slower of the two only.
    if search.fingerprint:
        exact = (reader.query().where(f"{search.where} AND fingerprint = {sql_string(search.fingerprint)}")
                 .limit(search.matches))
        queries.append(exact.select(columns) if columns else exact.with_row_id().select([]))
    return [query.to_arrow() for query in queries]
