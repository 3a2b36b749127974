"""What operators browse: per-server counts of a memory table, and one case in full with its history."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from store.config import MemoryConfig
from store.freshness import IsChanged, assess
from store.record import CaseDetail, ServerSummary, TrustPoint, VerdictEntry
from store.scope import sql_string
from store.table import case_summary, cited_ranges, row_analysis

__all__ = ["browse_filter", "case_detail", "server_summaries"]

_COUNT_COLUMNS = ["server", "tenant", "created_at", "expires_at"]


def browse_filter(server: str | None, tenant: str | None) -> str:
    """The `where` of an operator's listing: this server and tenant when given; empty for everything."""
    clauses = [f"{column} = {sql_string(value)}" for column, value in (("server", server), ("tenant", tenant))
               if value is not None]
    return " AND ".join(clauses)


def server_summaries(table: Any, now: float) -> list[ServerSummary]:
    """One summary per (server, tenant) of the rows of one memory table, tenants in name order."""
    columns = table.search().select(_COUNT_COLUMNS).limit(max(1, table.count_rows())).to_arrow().to_pydict()
    groups: dict[tuple[str, str], list[float]] = {}  # [cases, newest, expired]
    for server, tenant, created, expires in zip(*(columns[name] for name in _COUNT_COLUMNS), strict=True):
        group = groups.setdefault((str(server), str(tenant)), [0, 0.0, 0])
        group[0] += 1
        group[1] = max(group[1], float(created))
        group[2] += float(expires) <= now
    return [ServerSummary(server, tenant, int(cases), newest, int(expired))
            for (server, tenant), (cases, newest, expired) in sorted(groups.items())]


def case_detail(row: Mapping[str, Any], verdicts: Sequence[VerdictEntry], config: MemoryConfig, now: float,
                *, commit: str | None = None, is_changed: IsChanged | None = None) -> CaseDetail:
    """The whole of a stored row. Staleness is judged by age, and, given `commit` and `is_changed`, by
    whether the lines it cites changed between its commit and `commit`."""
    summary = case_summary(row, verdict=verdicts[-1].verdict if verdicts else None)
    max_age_s = config.max_age_for(summary.scope)
    cited = cited_ranges(row)
    freshness = assess(cited, case_commit=summary.commit, current_commit=commit,
                       is_changed=is_changed, age_s=now - summary.created_at, max_age_s=max_age_s)
    return CaseDetail(
        summary=summary, error_text=str(row.get("error_text") or ""), analysis=row_analysis(row),
        verdicts=tuple(verdicts), trust_history=_trust_history(summary.analyzer, summary.created_at,
                                                                summary.trust, verdicts),
        age_s=now - summary.created_at, max_age_s=max_age_s, expired=summary.expires_at <= now,
        stale=freshness.stale, stale_reasons=freshness.reasons,
        checked_against=commit if is_changed is not None and commit else None, cited_files=cited,
    )


def _trust_history(analyzer: str, created_at: float, trust: float,
                   verdicts: Sequence[VerdictEntry]) -> tuple[TrustPoint, ...]:
    """Trust as stored by the analyzer, then after each verdict; the last point is the row's trust now."""
    first = verdicts[0].trust_before if verdicts else trust
    points = [TrustPoint(created_at, first, f"stored ({analyzer or 'unknown'} analysis)")]
    points += [TrustPoint(v.at, v.trust_after, f"verdict {v.verdict}") for v in verdicts]
    if abs(points[-1].trust - trust) > 1e-9:  # a verdict the log missed (written by an older version)
        points.append(TrustPoint(points[-1].at, trust, "now"))
    return tuple(points)
