"""The analysis report: what the model must answer, and the `data` of the published analysis event."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["analyzed", "recurrence", "heuristic", "failed"]

NO_TRACE_NOTE = "no stack trace: nothing to map to the code"
"""The note of an analysis whose events carried no stack trace (a log message alone)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Location(_Model):
    """A place in the repository; `path` is relative to the repository root."""

    path: str
    line: int | None = Field(None, ge=1)
    function: str = ""


class Suspect(Location):
    """A ranked candidate for the culprit, with the evidence that ranked it."""

    score: float = Field(0.0, ge=0.0, le=1.0)
    reason: str = ""


class Fix(_Model):
    """A proposed change: `before` must be code that exists at the analysed commit."""

    path: str
    before: str = ""
    after: str = ""
    explanation: str = ""


class CitationRef(_Model):
    """A line range the answer rests on, as the model gives it."""

    path: str
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)


class Citation(CitationRef):
    """A validated citation pinned to a commit and the blob it was read from."""

    commit: str
    blob_sha: str


class AgentAnswer(_Model):
    """The JSON the model must produce as its final answer (sent to Ollama as the `format` schema)."""

    root_cause: str
    culprit: Location
    suspects: list[Suspect] = Field(default_factory=list)
    fix: Fix | None = None
    confidence: float = Field(ge=0.0, le=1.0)
    citations: list[CitationRef] = Field(default_factory=list)


class ExceptionMessage(_Model):
    """One distinct exception message of a burst (variable parts masked) and the events that carried it."""

    message: str
    count: int = Field(ge=1)
    example: str = Field("", description="The first such message as logged (redacted).")


class ClusterInfo(_Model):
    """The burst the analysis explains."""

    server: str
    tenant: str
    fingerprint: str
    exception_type: str
    first_seen: float
    last_seen: float
    count: int = Field(ge=1)
    sample_messages: list[str] = Field(default_factory=list)
    exception_messages: list[ExceptionMessage] = Field(
        default_factory=list, description="The distinct exception messages of the burst, most frequent first.")


class PastCaseRef(_Model):
    """A recalled memory case the analysis was given, with what people said about it."""

    memory_id: str
    score: float
    stale: bool
    stale_reasons: list[str] = Field(default_factory=list, description="Why the case is stale.")
    verdict: Literal["correct", "wrong"] | None = Field(
        None, description="The net human verdict on the case; null when nobody judged it (or verdicts cancel).")
    trust: float | None = Field(None, ge=0.0, le=1.0, description="The case's trust when it was recalled.")
    note: str = Field("", description="The note left with the latest verdict.")


class SuspectCommit(_Model):
    """A commit that last touched the culprit lines."""

    sha: str
    summary: str = ""
    author: str = ""
    date: str = ""
    path: str = ""


class Analysis(_Model):
    """The `data` of a `logagent.analysis.v1` event."""

    analysis_id: str
    status: Status
    analyzer: Literal["llm", "heuristic", "memory"]
    model: str = ""
    cluster: ClusterInfo
    commit: str | None = None
    root_cause: str = ""
    culprit: Location | None = None
    suspects: list[Suspect] = Field(default_factory=list)
    fix: Fix | None = None
    confidence: float = Field(0.0, ge=0.0, le=1.0)
    citations: list[Citation] = Field(default_factory=list)
    past_cases: list[PastCaseRef] = Field(default_factory=list)
    suspect_commits: list[SuspectCommit] = Field(default_factory=list)
    recurrence_of: str | None = None
    needs_review: bool = False
    review_reasons: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="What limited the analysis (fetch failed, ...).")
    failure_reason: str | None = None
    timings: dict[str, float] = Field(default_factory=dict)
    tokens: dict[str, int] = Field(default_factory=dict)
