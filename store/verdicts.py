"""The verdict log: every human verdict on a case, appended to a table of its own beside the case's.

A case row keeps only the sum of its verdicts and the latest note; the log keeps each verdict with its
note and the trust before and after, so `logagent memory show` can tell a case's history. Appends never
conflict the way updates of one row can, so a verdict is in the log even when its row update lost a race.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from store.record import Verdict, VerdictEntry
from store.scope import TABLE_PREFIX, sql_string

__all__ = ["append_verdict", "forget_verdicts", "read_verdicts", "verdict_table"]

_PREFIX = "verdicts_"
_SCHEMA = pa.schema([
    pa.field("memory_id", pa.string(), nullable=False),
    pa.field("at", pa.float64(), nullable=False),
    pa.field("verdict", pa.string(), nullable=False),
    pa.field("note", pa.string()),
    pa.field("trust_before", pa.float64()),
    pa.field("trust_after", pa.float64()),
])
_MAX_ENTRIES = 1_000


def verdict_table(memory_table: str) -> str:
    """The log's table name for a `memory_<server>` table (outside the memory prefix: never recalled)."""
    return _PREFIX + memory_table.removeprefix(TABLE_PREFIX)


def _open(db: Any, memory_table: str) -> Any | None:
    try:
        return db.open_table(verdict_table(memory_table))
    except ValueError:  # LanceDB's "was not found": nobody gave a verdict on this server yet
        return None


def append_verdict(db: Any, memory_table: str, memory_id: str, entry: VerdictEntry) -> None:
    """Add one verdict on `memory_id` to the log of `memory_table`."""
    table = _open(db, memory_table)
    if table is None:
        try:
            table = db.create_table(verdict_table(memory_table), schema=_SCHEMA, exist_ok=True)
        except (ValueError, OSError):  # another writer created it between our open and create
            table = db.open_table(verdict_table(memory_table))
    row = {"memory_id": memory_id, "at": entry.at, "verdict": entry.verdict, "note": entry.note,
           "trust_before": entry.trust_before, "trust_after": entry.trust_after}
    table.add(pa.Table.from_pylist([row], schema=_SCHEMA))


def read_verdicts(db: Any, memory_table: str, memory_id: str) -> tuple[VerdictEntry, ...]:
    """The verdicts on `memory_id`, oldest first."""
    table = _open(db, memory_table)
    if table is None:
        return ()
    rows = table.search().where(f"memory_id = {sql_string(memory_id)}").limit(_MAX_ENTRIES).to_list()
    rows.sort(key=lambda row: float(row["at"]))
    return tuple(_entry(row) for row in rows)


def forget_verdicts(db: Any, memory_table: str, memory_id: str) -> None:
    """Delete the log of a forgotten case: its notes go with it."""
    table = _open(db, memory_table)
    if table is not None:
        table.delete(f"memory_id = {sql_string(memory_id)}")


def _entry(row: dict[str, Any]) -> VerdictEntry:
    verdict: Verdict = "correct" if row["verdict"] == "correct" else "wrong"
    return VerdictEntry(at=float(row["at"]), verdict=verdict, note=str(row.get("note") or ""),
                        trust_before=float(row.get("trust_before") or 0.0),
                        trust_after=float(row.get("trust_after") or 0.0))
