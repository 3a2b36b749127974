"""Memory maintenance per table: expiry, compaction, and the scalar and vector indexes recall reads."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from lancedb.index import Bitmap, BTree, IvfFlat

from store.config import MemoryConfig
from store.scope import sql_float

__all__ = ["maintain_table"]

_IVF_PREFIX = "vector_ivf"
# Low-cardinality filter columns get bitmaps; ids, fingerprints and timestamps get B-trees.
_SCALAR_INDEXES: tuple[tuple[str, type[BTree] | type[Bitmap]], ...] = (
    ("id", BTree), ("tenant", Bitmap), ("scope", Bitmap), ("server", Bitmap), ("fingerprint", BTree),
    ("expires_at", BTree),
)

Retry = Callable[[Callable[[], Any]], Any]


def maintain_table(table: Any, config: MemoryConfig, now: float, retry: Retry) -> tuple[int, bool]:
    """Delete the table's expired rows, compact it and build the indexes it has outgrown; returns the
    rows deleted and whether the vector index was (re)built."""
    expired = 0
    where = f"expires_at <= {sql_float(now)}"
    if table.count_rows(where):
        expired = retry(lambda: table.delete(where)).num_deleted_rows
    retry(table.optimize)
    rows = table.count_rows()
    indices = table.list_indices()
    existing = {tuple(index.columns) for index in indices}
    if rows >= config.scalar_index_min_rows:
        _index_filter_columns(table, existing, retry)
    vector_indexes = [index.name for index in indices if list(index.columns) == ["vector"]]
    partitions = max(1, math.isqrt(rows))
    built = _ivf_partitions(vector_indexes)
    if rows >= config.index_min_rows and (built is None or 2 * built <= partitions):
        _build_vector_index(table, partitions, vector_indexes, retry)
        _index_filter_columns(table, existing, retry)
        return expired, True
    return expired, False


def _build_vector_index(table: Any, partitions: int, replaced: Sequence[str], retry: Retry) -> None:
    # IVF_FLAT keeps raw vectors (exact distances inside probed partitions) and trains in seconds.
    # sqrt(rows) partitions keep each probe small: LanceDB's default of ~4k rows per partition
    # makes ten probes read 40% of a 100k-row table. Rebuilt (under a new name, the old one dropped
    # once the new one serves) when the table has grown fourfold.
    name = f"{_IVF_PREFIX}{partitions}"
    config = IvfFlat(distance_type="cosine", num_partitions=partitions)
    retry(lambda: table.create_index("vector", config=config, name=name, replace=True))
    for old in replaced:
        if old != name:
            retry(partial(table.drop_index, old))


def _index_filter_columns(table: Any, existing: set[tuple[str, ...]], retry: Retry) -> None:
    # Recall's pre-filter and remember's merge on id then read indexes instead of scanning columns.
    for column, kind in _SCALAR_INDEXES:
        if (column,) not in existing:
            retry(partial(table.create_index, column, config=kind()))
            existing.add((column,))


def _ivf_partitions(index_names: Sequence[str]) -> int | None:
    """Partitions of the vector index, read from its name (`vector_ivf<N>`); 0 for an index named
    otherwise (built by an older version, so rebuilt once), None when there is none."""
    if not index_names:
        return None
    counts = [int(name.removeprefix(_IVF_PREFIX)) for name in index_names
              if name.startswith(_IVF_PREFIX) and name.removeprefix(_IVF_PREFIX).isdigit()]
    return max(counts, default=0)
