"""Errors of the memory store; each says whether a retry with backoff can succeed.

The store cannot import `analysis.errors.LogAgentError` (packages stay independent), so it has its own
base with the same `retriable` contract; the pipeline maps both the same way.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base error of the store. `retriable` tells the caller whether a retry with backoff can succeed."""

    retriable: bool = False

    def __init__(self, message: str, *, retriable: bool | None = None) -> None:
        super().__init__(message)
        if retriable is not None:
            self.retriable = retriable


class EmbeddingUnavailable(StoreError):
    """The embedding backend could not answer (down, timed out, bad reply); try again later."""

    retriable = True


class IncompatibleEmbedding(StoreError):
    """The embedder's dimension or model differs from the one a table was built with; never mix them."""


class RefusedCase(StoreError):
    """A case the memory must not keep (a failed or recurrence analysis, an invalid field)."""
