"""The error base of Log Agent: every error says whether retrying can help."""

from __future__ import annotations


class LogAgentError(Exception):
    """Base error. `retriable` tells the caller whether a retry with backoff can succeed."""

    retriable: bool = False


class BadInput(LogAgentError):
    """A message that can never be processed; it goes to the DLQ with `reason` (a short, bounded code)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
