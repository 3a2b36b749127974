"""The verdict log: every human verdict on a case, appended to a table of its own beside the case's, and
the truth the case's row is brought to.

A case row keeps what recall ranks and filters by: the net of its verdicts (`feedback`), the trust they
leave and the latest note. The log keeps each verdict with its note, so `logagent memory show` can tell a
case's history. Appends never lose one another, so the row is not counted up in place: it is set to the
fold of the log (`fold_verdicts`), and checked against it again (`judge`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import pyarrow as pa

from store.config import TrustWeights
from store.record import Judged, Verdict, VerdictEntry
from store.scope import TABLE_PREFIX, case_filter, sql_string

__all__ = ["VerdictFold", "append_verdict", "fold_verdicts", "forget_verdicts", "judge", "latest_verdicts",
           "read_verdicts", "verdict_schema", "verdict_table"]

log = logging.getLogger("logagent.memory")

_PREFIX = "verdicts_"
_SCHEMA = pa.schema([
    pa.field("memory_id", pa.string(), nullable=False),
    pa.field("at", pa.float64(), nullable=False),
    pa.field("verdict", pa.string(), nullable=False),
    pa.field("note", pa.string()),
    pa.field("trust_before", pa.float64()),
    pa.field("trust_after", pa.float64()),
    pa.field("verdict_id", pa.string()),  # added to older logs on their next append
])
_CASE_COLUMNS = ["trust", "feedback", "feedback_note"]

Retry = Callable[[Callable[[], Any]], Any]


@dataclass(frozen=True, slots=True)
class VerdictFold:
    """What a case's verdicts add up to, and each verdict with the trust before and after it, in order."""

    trust: float
    feedback: float
    note: str
    entries: tuple[VerdictEntry, ...]

    def matches(self, row: dict[str, Any]) -> bool:
        """Whether a case row (`trust`, `feedback`, `feedback_note`) already holds this fold."""
        return (math.isclose(float(row["trust"] or 0.0), self.trust, rel_tol=1e-9, abs_tol=1e-12)
                and float(row["feedback"] or 0.0) == self.feedback and (row["feedback_note"] or "") == self.note)


def fold_verdicts(entries: Sequence[VerdictEntry], weights: TrustWeights) -> VerdictFold | None:
    """The log folded in time order, from the trust the case had before its first verdict (that entry's
    `trust_before`, its unreviewed trust): `correct` sets trust to the human weight, `wrong` multiplies
    the lower of the trust so far and the unreviewed trust by the wrong factor, so a case whose latest
    verdict is wrong always stands below where it stood unreviewed (a correct then a wrong leaves an llm
    case at 0.35, not 0.5, under an unreviewed heuristic's 0.4);
    feedback is the number of correct verdicts less the wrong ones. A verdict id seen before in that order
    is the same verdict delivered again (two replicas may both append it): it counts once. None for an
    empty log."""
    if not entries:
        return None
    ordered = sorted(entries, key=lambda e: (e.at, e.verdict, e.note))  # the same order for every writer
    unreviewed = ordered[0].trust_before
    trust, feedback, folded, ids = unreviewed, 0.0, [], set()
    for entry in ordered:
        if entry.verdict_id in ids:
            continue
        if entry.verdict_id:
            ids.add(entry.verdict_id)
        after = _after(trust, unreviewed, entry.verdict, weights)
        folded.append(replace(entry, trust_before=trust, trust_after=after))
        trust, feedback = after, feedback + (1.0 if entry.verdict == "correct" else -1.0)
    return VerdictFold(trust, feedback, ordered[-1].note, tuple(folded))


def _after(trust: float, unreviewed: float, verdict: Verdict, weights: TrustWeights) -> float:
    return weights.human if verdict == "correct" else min(trust, unreviewed) * weights.wrong_factor


def judge(db: Any, table: Any, memory_id: str, verdict: Verdict, note: str, weights: TrustWeights, *,
          retry: Retry, rounds: int, verdict_id: str = "", tenant: str | None = None) -> Judged:
    """Append a verdict on case `memory_id` of memory `table` to its log, then bring the case row to the
    fold of the log. UNKNOWN when the table holds no such case (of `tenant`, when given). A `verdict_id`
    the log already holds is not appended again (a redelivered feedback message: DUPLICATE); the row is
    still brought to the fold.

    Why the row ends right when replicas judge one case at once: a writer appends its verdict before it
    writes the row, writes nothing but a fold of the log, and after every write re-reads log and row at
    their latest versions, stopping only when the row equals the fold. Take the last append: its
    writer's check after it reads the whole log. Either no row write follows that check, and the row it
    found equal to the whole log's fold stays; or the last write of all follows it, and that write's
    writer checks after it against the whole log too, so a stale fold (from a writer that read the log
    before the last append and committed last) is seen and rewritten. Only a writer that runs out of
    `rounds` while others keep writing can leave the row behind; the next verdict on the case repairs
    it, and `memory show` tells the history from the log whatever the row holds.

    Each entry keeps in `trust_before` the trust before the case's first verdict (the earliest entry's,
    or the row's when the log was empty, read before the log so no verdict had touched it), so the fold
    starts from it whatever the writers' clocks; `trust_after` is this writer's fold at the time.
    """
    where = case_filter(memory_id, tenant)
    row = _case_row(table, where)
    if row is None:
        return Judged.UNKNOWN
    seen = _log_entries(db, table.name, memory_id)
    folded = fold_verdicts(seen, weights)
    base = folded.entries[0].trust_before if folded else float(row["trust"] or 0.0)
    judged = Judged.APPLIED
    if verdict_id and any(e.verdict_id == verdict_id for e in seen):
        fold, judged = folded, Judged.DUPLICATE
    else:
        entry = VerdictEntry(time.time(), verdict, note, base,
                             _after(folded.trust if folded else base, base, verdict, weights), verdict_id)
        retry(lambda: append_verdict(db, table.name, memory_id, entry))
        fold = fold_verdicts([*seen, entry], weights)
    for _ in range(rounds):
        if fold is not None:
            retry(partial(table.update, where=where,
                          values={"trust": fold.trust, "feedback": fold.feedback, "feedback_note": fold.note}))
        fold = fold_verdicts(_log_entries(db, table.name, memory_id), weights)
        row = _case_row(table, where)
        if row is None or fold is None or fold.matches(row):  # forgotten meanwhile, or settled
            return judged
    log.warning("case row still differs from its verdict log", extra={"fields": {"memory_id": memory_id}})
    return judged


def _case_row(table: Any, where: str) -> dict[str, Any] | None:
    table.checkout_latest()  # whatever `read_consistency_s` allows other reads, these see every commit
    rows: list[dict[str, Any]] = table.search().where(where).select(_CASE_COLUMNS).limit(1).to_list()
    return rows[0] if rows else None


def verdict_schema() -> pa.Schema:
    """The verdict log's columns."""
    return _SCHEMA


def verdict_table(memory_table: str) -> str:
    """The log's table name for a `memory_<server>` table (outside the memory prefix: never recalled)."""
    return _PREFIX + memory_table.removeprefix(TABLE_PREFIX)


def _open(db: Any, memory_table: str) -> Any | None:
    try:
        return db.open_table(verdict_table(memory_table))  # opened afresh: at its latest version
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
    if "verdict_id" not in table.schema.names:  # a log written before verdicts had ids
        table.add_columns(_SCHEMA.field("verdict_id"))
    row = {"memory_id": memory_id, "at": entry.at, "verdict": entry.verdict, "note": entry.note,
           "trust_before": entry.trust_before, "trust_after": entry.trust_after,
           "verdict_id": entry.verdict_id or None}
    table.add(pa.Table.from_pylist([row], schema=_SCHEMA))


def read_verdicts(db: Any, memory_table: str, memory_id: str, weights: TrustWeights) -> tuple[VerdictEntry, ...]:
    """The verdicts on `memory_id`, oldest first, each with the trust before and after it by the fold."""
    fold = fold_verdicts(_log_entries(db, memory_table, memory_id), weights)
    return fold.entries if fold else ()


def latest_verdicts(db: Any, memory_table: str, memory_ids: Sequence[str]) -> dict[str, Verdict]:
    """The latest verdict on each of `memory_ids` that has one, in the fold's order: the one its trust
    follows (the net in `feedback` is 0 after a wrong and a correct one)."""
    table = _open(db, memory_table) if memory_ids else None
    if table is None:
        return {}
    rows = table.search().where(f"memory_id IN ({', '.join(map(sql_string, memory_ids))})").limit(None).to_list()
    entries = sorted(((str(row["memory_id"]), _entry(row)) for row in rows),
                     key=lambda pair: (pair[1].at, pair[1].verdict, pair[1].note))
    return {memory_id: entry.verdict for memory_id, entry in entries}


def _log_entries(db: Any, memory_table: str, memory_id: str) -> list[VerdictEntry]:
    table = _open(db, memory_table)
    if table is None:
        return []
    # The whole log: every writer must fold the same entries.
    rows = table.search().where(f"memory_id = {sql_string(memory_id)}").limit(None).to_list()
    return [_entry(row) for row in rows]


def forget_verdicts(db: Any, memory_table: str, memory_id: str) -> None:
    """Delete the log of a forgotten case: its notes go with it."""
    table = _open(db, memory_table)
    if table is not None:
        table.delete(f"memory_id = {sql_string(memory_id)}")


def _entry(row: dict[str, Any]) -> VerdictEntry:
    verdict: Verdict = "correct" if row["verdict"] == "correct" else "wrong"
    return VerdictEntry(at=float(row["at"]), verdict=verdict, note=str(row.get("note") or ""),
                        trust_before=float(row.get("trust_before") or 0.0),
                        trust_after=float(row.get("trust_after") or 0.0),
                        verdict_id=str(row.get("verdict_id") or ""))
