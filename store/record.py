"""Plain data the store takes and returns: what to remember, what to recall, what comes back."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

StorableStatus = Literal["analyzed", "heuristic"]
STORABLE_STATUSES: frozenset[str] = frozenset({"analyzed", "heuristic"})
Verdict = Literal["correct", "wrong"]


def net_verdict(feedback: float) -> Verdict | None:
    """The verdict a case's feedback score adds up to: None when nobody judged it or verdicts cancel."""
    if feedback > 0:
        return "correct"
    return "wrong" if feedback < 0 else None


@dataclass(frozen=True, slots=True)
class CitedRange:
    """A line range a stored analysis rests on, with the blob it was read from."""

    path: str
    start_line: int
    end_line: int
    blob_sha: str = ""

    def __str__(self) -> str:
        """`path:12`, or `path:12-14` for more than one line."""
        lines = f"{self.start_line}-{self.end_line}" if self.end_line != self.start_line else str(self.start_line)
        return f"{self.path}:{lines}"


@dataclass(frozen=True, slots=True)
class NewCase:
    """A validated analysis to remember.

    `id` is the analysis id (deterministic, so replays are idempotent). `error_text` must already be
    redacted by the caller. `trust` defaults to the configured weight of `analyzer`; `expires_at` is
    derived from `created_at` and the scope's TTL, and `feedback` starts at 0.
    """

    id: str
    server: str
    tenant: str
    scope: str
    fingerprint: str
    exception_type: str
    error_text: str
    analysis_json: str
    analyzer: str
    commit: str | None
    created_at: float
    cited_files: tuple[CitedRange, ...] = ()
    status: str = "analyzed"
    trust: float | None = None


@dataclass(frozen=True, slots=True)
class RememberResult:
    """Outcome of `remember`: `index_lag_s` is the time from the call until the case was recallable."""

    memory_id: str
    inserted: bool
    index_lag_s: float


@dataclass(frozen=True, slots=True)
class RecallQuery:
    """What a new burst looks like; recall only ever searches `server`'s table for `tenant` + `scope`.

    `identifiers` are class and method names from the burst's frames (lexical matching);
    `commit` is the commit now analysed (freshness); `now` is epoch seconds.
    """

    server: str
    tenant: str
    scope: str
    fingerprint: str
    exception_type: str
    text: str
    now: float
    identifiers: tuple[str, ...] = ()
    commit: str | None = None


@dataclass(frozen=True, slots=True)
class PastCase:
    """A recalled case. `summary` is the text to inject (counted against the budget); `contaminated`
    lists reasons the case looks unsafe to trust blindly (the pipeline sets `needs_review`)."""

    memory_id: str
    score: float
    stale: bool
    analysis: Mapping[str, Any]
    created_at: float
    commit: str | None
    fingerprint: str
    exception_type: str
    analyzer: str
    status: str
    trust: float
    feedback: float
    summary: str
    exact_fingerprint: bool = False
    cited_files: tuple[CitedRange, ...] = ()
    stale_reasons: tuple[str, ...] = ()
    contaminated: tuple[str, ...] = ()
    citations_checked: int = 0
    stale_citations: int = 0
    note: str = ""
    """The note left with the latest human verdict."""

    @property
    def verdict(self) -> Verdict | None:
        """The net human verdict on the case."""
        return net_verdict(self.feedback)


@dataclass(frozen=True, slots=True)
class RecallResult:
    """Recalled cases, best first, and the counts the pipeline turns into metrics.

    `citations_checked` / `stale_citations` cover every case whose freshness was assessed, including
    stale ones dropped because of `drop_stale` (`stale_dropped`). `candidates` is how many rows the
    pre-filtered query returned.
    """

    cases: list[PastCase] = field(default_factory=list)
    candidates: int = 0
    citations_checked: int = 0
    stale_citations: int = 0
    stale_dropped: int = 0

    @property
    def contaminated(self) -> bool:
        """True when any recalled case looks contaminated."""
        return any(case.contaminated for case in self.cases)


@dataclass(frozen=True, slots=True)
class CaseSummary:
    """One stored case as operators see it (`logagent memory list|search`)."""

    memory_id: str
    server: str
    tenant: str
    scope: str
    fingerprint: str
    exception_type: str
    status: str
    analyzer: str
    trust: float
    feedback: float
    created_at: float
    expires_at: float
    commit: str | None
    score: float | None = None
    root_cause: str = ""
    """The first line of the stored root cause."""
    culprit: str = ""
    """`path:line function` of the stored culprit."""
    verdict: Verdict | None = None
    """The latest human verdict, which its trust follows."""
    note: str = ""


@dataclass(frozen=True, slots=True)
class ServerSummary:
    """What the memory holds for one server and tenant (`logagent memory servers`)."""

    server: str
    tenant: str
    cases: int
    newest_at: float
    expired: int
    """Cases past their TTL that maintenance has not compacted away yet (never recalled)."""


@dataclass(frozen=True, slots=True)
class VerdictEntry:
    """One human verdict on a case, as the verdict log keeps it."""

    at: float
    verdict: Verdict
    note: str
    trust_before: float
    trust_after: float
    verdict_id: str = ""  # the same verdict delivered again carries the same id ("" for none)


class Judged(enum.IntEnum):
    """What a verdict did: false only when no case had the id (a verdict delivered again is `DUPLICATE`)."""

    UNKNOWN = 0
    DUPLICATE = 1
    APPLIED = 2


@dataclass(frozen=True, slots=True)
class TrustPoint:
    """The trust of a case from `at` on, and what set it (its analyzer, or a verdict)."""

    at: float
    trust: float
    cause: str


@dataclass(frozen=True, slots=True)
class CaseDetail:
    """One stored case in full (`logagent memory show`): the analysis, its verdicts, its trust over time,
    and whether it is still fresh (by age, and by its cited lines when a repository was given)."""

    summary: CaseSummary
    error_text: str
    analysis: Mapping[str, Any]
    verdicts: tuple[VerdictEntry, ...]
    trust_history: tuple[TrustPoint, ...]
    age_s: float
    max_age_s: float
    expired: bool
    stale: bool
    stale_reasons: tuple[str, ...] = ()
    checked_against: str | None = None
    """The commit the cited lines were compared with; None when they were not compared."""
    cited_files: tuple[CitedRange, ...] = ()
    """The line ranges the case rests on; none for a case that cites no code (only its age can stale it)."""


@dataclass(frozen=True, slots=True)
class MaintenanceReport:
    """What `maintain` did: rows deleted as expired, tables compacted, tables newly indexed."""

    expired_deleted: int = 0
    tables: tuple[str, ...] = ()
    indexed: tuple[str, ...] = ()
