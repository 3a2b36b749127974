"""What `logagent notify` reads from an analysis event: a tolerant view of the published contract.

The reader takes only the fields the sinks show and ignores every other one, in the envelope (CloudEvents
extension attributes such as `traceparent`) and in `data` alike, so newer producers never break it. A
record that is not an analysis event at all raises `BadNotice` with a short reason for the DLQ.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from analysis.errors import BadInput

__all__ = ["EVENT_TYPE", "BadNotice", "Notice", "issue_key", "parse_notice", "read_event"]

EVENT_TYPE = "logagent.analysis.v1"
_MAX_EVENT_BYTES = 4 * 1024 * 1024
_YEAR_10000 = 253_402_300_800.0


class BadNotice(BadInput):
    """A record of the analyses topic that is not a readable analysis event."""


class _View(BaseModel):
    # Unknown fields are dropped: the contract lets producers add optional fields and extensions.
    model_config = ConfigDict(extra="ignore", frozen=True)


class Place(_View):
    """A file and line of the repository (the culprit)."""

    path: str
    line: int | None = None
    function: str = ""


class FixView(_View):
    """The suggested change."""

    path: str
    before: str = ""
    after: str = ""
    explanation: str = ""


class PastCase(_View):
    """A recalled case; `verdict` and `note` appear once the memory reports them."""

    memory_id: str
    score: float = 0.0
    stale: bool = False
    verdict: str | None = None
    note: str = ""


class Burst(_View):
    """The burst the analysis explains."""

    server: str = Field(min_length=1)
    tenant: str = ""
    fingerprint: str = Field(min_length=1)
    exception_type: str = ""
    # Epoch seconds a calendar can print: from 1970 to before the year 10000 (a time past it ended delivery).
    first_seen: float = Field(ge=0, lt=_YEAR_10000)
    last_seen: float = Field(ge=0, lt=_YEAR_10000)
    count: int = Field(1, ge=1)
    sample_messages: tuple[str, ...] = ()


class Notice(_View):
    """One analysis as the sinks render it (the `data` of the event)."""

    analysis_id: str = Field(min_length=1)
    status: str
    analyzer: str = ""
    model: str = ""
    cluster: Burst
    commit: str | None = None
    root_cause: str = ""
    culprit: Place | None = None
    fix: FixView | None = None
    confidence: float = 0.0
    past_cases: tuple[PastCase, ...] = ()
    recurrence_of: str | None = None
    needs_review: bool = False
    failure_reason: str | None = None

    @property
    def server(self) -> str:
        """The server id (the burst's)."""
        return self.cluster.server


class _Envelope(_View):
    type: str
    id: str = ""
    data: Notice


def read_event(raw: bytes | None, redact: Callable[[Any], Any] | None = None) -> tuple[Notice | None, bytes]:
    """The analysis a record carries (None for a well-formed event of another type, not ours to send),
    and the bytes to forward: the record with every string passed through `redact`, byte for byte the
    original when that changed nothing.

    Raises BadNotice for anything that is not a CloudEvent carrying a readable analysis.
    """
    if raw is None:
        raise BadNotice("empty")
    if len(raw) > _MAX_EVENT_BYTES:
        raise BadNotice("too_large", f"{len(raw)} bytes")
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadNotice("not_json", str(exc)[:100]) from None
    if not isinstance(doc, dict):
        raise BadNotice("not_object")
    kind = doc.get("type")
    if isinstance(kind, str) and kind != EVENT_TYPE:
        return None, raw
    if redact is not None:
        clean = redact(doc)
        raw, doc = (raw, doc) if clean == doc else (orjson.dumps(clean), clean)
    try:
        return _Envelope.model_validate(doc).data, raw
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise BadNotice("bad_event", f"{where}: {first['msg']}") from None


def parse_notice(raw: bytes | None) -> Notice | None:
    """The analysis a record carries, as `read_event` reads it (no redaction)."""
    return read_event(raw)[0]


def issue_key(notice: Notice) -> str:
    """The label naming one failure of one server in an issue tracker: the same on every replay.

    A digest keeps it within label limits (GitHub allows 50 characters) whatever the server id's length.
    """
    digest = hashlib.sha256(f"{notice.server}\x1f{notice.cluster.fingerprint}".encode()).hexdigest()
    return f"logagent:{digest[:16]}"
