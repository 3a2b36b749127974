"""Freshness of a recalled case: its cited lines changed since its commit, or it is simply too old.

The check is pure; what "changed" means comes from an injected callable (the pipeline builds one on
git), so the store never touches a repository.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from store.record import CitedRange

IsChanged = Callable[[str, int, int, str, str], bool]
"""is_changed(path, start_line, end_line, from_commit, to_commit) -> whether those lines changed."""


@dataclass(frozen=True, slots=True)
class Freshness:
    """Verdict on one case: stale or not, why, and how many citations were checked / found stale."""

    stale: bool
    reasons: tuple[str, ...] = ()
    checked: int = 0
    stale_citations: int = 0


def assess(
    cited: Iterable[CitedRange],
    *,
    case_commit: str | None,
    current_commit: str | None,
    is_changed: IsChanged | None,
    age_s: float,
    max_age_s: float,
) -> Freshness:
    """Check every cited range against the current commit and the case's age.

    A case older than its max age has every citation stale (the lines are not even compared). A range
    whose check raises (unknown commit, path gone) counts as stale: an unverifiable citation must not be
    presented as current.
    """
    ranges = tuple(cited)
    if age_s > max_age_s:
        reason = f"older than max age ({age_s / 86_400:.1f} days)"
        return Freshness(True, (reason,), len(ranges), len(ranges))
    if case_commit and case_commit == current_commit:
        return Freshness(False, (), len(ranges), 0)  # same commit: the cited lines are what they were
    reasons: list[str] = []
    checked = stale_citations = 0
    if is_changed is not None and case_commit and current_commit:
        for cite in ranges:
            checked += 1
            span = str(cite)
            try:
                changed = is_changed(cite.path, cite.start_line, cite.end_line, case_commit, current_commit)
            except Exception as exc:  # the injected check may fail for any git reason
                reasons.append(f"unverifiable {span} ({type(exc).__name__})")
                stale_citations += 1
                continue
            if changed:
                reasons.append(f"changed {span}")
                stale_citations += 1
    return Freshness(bool(reasons), tuple(reasons), checked, stale_citations)
