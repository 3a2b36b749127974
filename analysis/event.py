"""The normalised error event every input shape decodes to, and the closed burst handed to analysis."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Shape = Literal["native", "ecs", "otel", "logstash"]


@dataclass(frozen=True, slots=True)
class Frame:
    """One stack frame. `in_app` is None when the source did not say; the signature rules decide then."""

    function: str
    filename: str = ""
    abs_path: str = ""
    module: str = ""
    lineno: int | None = None
    in_app: bool | None = None


@dataclass(frozen=True, slots=True)
class ExceptionInfo:
    """One exception of a chain. `frames` are innermost first: frames[0] is where it was raised."""

    type: str
    value: str
    frames: tuple[Frame, ...] = ()


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    """A decoded, normalised error log record.

    `exceptions` is the chain, outermost first and root cause last; empty for message-only errors.
    `raw_trace` keeps the text trace as received (before redaction) when the shape carried one.
    `extra` keeps unknown fields, never interpreted.
    """

    server_id: str
    timestamp: float
    message: str
    level: str = "error"
    logger: str = ""
    commit: str | None = None
    tenant: str = "default"
    exceptions: tuple[ExceptionInfo, ...] = ()
    raw_trace: str = ""
    shape: Shape = "native"
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def root_cause(self) -> ExceptionInfo | None:
        """The innermost cause of the chain, the exception the fingerprint and localiser look at."""
        return self.exceptions[-1] if self.exceptions else None

    @property
    def exception_type(self) -> str:
        """Type of the root cause, or empty for a message-only error."""
        root = self.root_cause
        return root.type if root else ""


@dataclass(frozen=True, slots=True)
class Cluster:
    """A closed burst: every event one server logged with one signature inside one window."""

    server_id: str
    tenant: str
    fingerprint: str
    exception_type: str
    first_seen: float
    last_seen: float
    count: int
    commits: tuple[str, ...]
    samples: tuple[ErrorEvent, ...]
    """A bounded sample of the burst's events, the first one first."""

    @property
    def representative(self) -> ErrorEvent:
        """The event analysis reads: the newest sample (the commit most likely still deployed)."""
        return self.samples[-1]

    @property
    def commit(self) -> str | None:
        """The deployed commit to analyse at: the last one the burst saw."""
        return self.commits[-1] if self.commits else None
