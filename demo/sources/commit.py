"""One commit of a sample service: its message and the files it writes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CommitSpec:
    """One commit: its message, the files it writes (path -> text), and whether a deploy runs it."""

    message: str
    files: dict[str, str]
    deployed: bool = False
