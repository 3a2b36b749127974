"""A recalled row, turned into what ranking needs (`candidate_of`) and into what the caller gets
(`past_case_of`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from store.freshness import Freshness
from store.hygiene import contamination_reasons, summarise
from store.record import PastCase
from store.relevance import Candidate, Ranked
from store.table import cited_ranges

__all__ = ["candidate_of", "past_case_of"]


def candidate_of(row: Mapping[str, Any], analysis: Mapping[str, Any]) -> Candidate:
    """What ranking needs of a stored case."""
    root_cause = analysis.get("root_cause")
    return Candidate(
        memory_id=str(row["id"]), fingerprint=str(row["fingerprint"]),
        exception_type=str(row.get("exception_type") or ""), error_text=str(row.get("error_text") or ""),
        root_cause=root_cause if isinstance(root_cause, str) else "", vector=row["vector"],
        created_at=float(row["created_at"]), trust=float(row.get("trust") or 0.0),
        feedback=float(row.get("feedback") or 0.0), text_chars=len(summarise(analysis)),
    )


def past_case_of(item: Ranked, row: Mapping[str, Any], analysis: dict[str, Any], verdict: Freshness,
                  tenant: str) -> PastCase:
    """A ranked case as the caller gets it: with its freshness verdict and contamination reasons."""
    text = f"{row.get('error_text') or ''}\n{row.get('analysis_json') or ''}"
    return PastCase(
        memory_id=item.candidate.memory_id, score=item.score, stale=verdict.stale, analysis=analysis,
        created_at=item.candidate.created_at, commit=row.get("commit"),
        fingerprint=item.candidate.fingerprint,
        exception_type=item.candidate.exception_type, analyzer=str(row.get("analyzer") or ""),
        status=str(row.get("status") or ""), trust=item.candidate.trust, feedback=item.candidate.feedback,
        summary=summarise(analysis), exact_fingerprint=item.exact_fingerprint, cited_files=cited_ranges(row),
        stale_reasons=verdict.reasons, contaminated=contamination_reasons(text, tenant),
        citations_checked=verdict.checked, stale_citations=verdict.stale_citations,
        note=str(row.get("feedback_note") or ""),
    )
