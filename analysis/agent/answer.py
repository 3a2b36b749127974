"""The model's answer checked against the commit before it becomes the analysis.

Invented paths, unread citations and fixes whose `before` is not in the file are dropped, each with a
review reason, so what is published cites only code that exists at the analysed commit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from analysis.code.repo import Checkout
from analysis.code.validate import validate_citations, validate_fix, validate_location
from analysis.report import AgentAnswer, Analysis, PastCaseRef, Suspect

__all__ = ["past_case_refs", "validated_analysis"]


def validated_analysis(answer: AgentAnswer, base: Analysis, checkout: Checkout, reads: set[str],
                       notes: Sequence[str]) -> tuple[Analysis, list[str]]:
    """`base` updated with the checked answer, and why each dropped citation was dropped.

    `reads` are the paths the conversation read (a citation of an unread file is dropped); `notes` are
    added to the analysis's notes.
    """
    review: list[str] = []
    citations, dropped = validate_citations(answer.citations, checkout, reads)
    if dropped:
        review.append(f"{len(dropped)} citation(s) dropped: " + "; ".join(dropped)[:300])
    if not citations:
        review.append("no citation survived validation")
    culprit, why = validate_location(answer.culprit, checkout)
    if culprit is None:
        review.append(f"model culprit rejected ({why}); heuristic culprit kept")
        culprit = base.culprit
    suspects: list[Suspect] = []
    for suspect in answer.suspects:
        checked, _ = validate_location(suspect, checkout)
        if isinstance(checked, Suspect):
            suspects.append(checked)
    fix = None
    if answer.fix is not None:
        fix, fix_note = validate_fix(answer.fix, checkout)
        if fix_note:
            review.append(fix_note)
    analysis = base.model_copy(
        update={
            "status": "analyzed",
            "analyzer": "llm",
            "root_cause": answer.root_cause,
            "culprit": culprit,
            "suspects": suspects or base.suspects,
            "fix": fix,
            "confidence": answer.confidence,
            "citations": citations,
            "needs_review": base.needs_review or bool(review),
            "review_reasons": [*base.review_reasons, *review],
            "failure_reason": None,
            "notes": [*base.notes, *notes],
        }
    )
    return analysis, dropped


def past_case_refs(cases: Sequence[Mapping[str, Any]]) -> list[PastCaseRef]:
    """The references to the recalled cases the prompt showed, for the event's `past_cases`."""
    refs: list[PastCaseRef] = []
    for case in cases:
        memory_id, score = case.get("memory_id"), case.get("score")
        if not (isinstance(memory_id, str) and isinstance(score, int | float)):
            continue
        verdict, trust, note = case.get("verdict"), case.get("trust"), case.get("note")
        refs.append(PastCaseRef(
            memory_id=memory_id, score=float(score), stale=bool(case.get("stale")),
            verdict=verdict if verdict in ("correct", "wrong") else None,
            trust=min(max(float(trust), 0.0), 1.0) if isinstance(trust, int | float) else None,
            note=note if isinstance(note, str) else "",
        ))
    return refs
