"""Line numbers across commits: where a line of a file at one commit sits at another, through their diff.

A trace's line numbers are true at the commit that logged it. Read at another commit (`logagent analyze
--commit HEAD` on an older event), the same numbers point at other code; mapped through the diff they
point at the same code again, unless that very line changed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import git

from analysis.code.repo import open_repo

__all__ = ["Hunk", "file_hunks", "map_line"]

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Hunk:
    """One `-U0` diff hunk: `old_count` lines from `old_start` became `new_count` lines from `new_start`."""

    old_start: int
    old_count: int
    new_start: int
    new_count: int


def map_line(hunks: Sequence[Hunk], line: int) -> int | None:
    """Where `line` of the old file is in the new one; None when that line itself changed or went."""
    shift = 0
    for hunk in sorted(hunks, key=lambda h: h.old_start):
        if hunk.old_count == 0:  # a pure insertion after old_start
            if hunk.old_start < line:
                shift += hunk.new_count
            continue
        if hunk.old_start > line:
            break
        if hunk.old_start + hunk.old_count - 1 >= line:
            return None
        shift += hunk.new_count - hunk.old_count
    return line + shift


def file_hunks(repo_dir: Path, path: str, from_commit: str, to_commit: str) -> list[Hunk] | None:
    """The hunks of `path` from `from_commit` to `to_commit`; None when either commit lacks the file."""
    repo = open_repo(repo_dir)
    try:
        try:
            old = repo.commit(from_commit).tree / path
            new = repo.commit(to_commit).tree / path
        except (KeyError, ValueError, git.BadName, git.GitCommandError):
            return None
        if old.hexsha == new.hexsha:
            return []
        diff = str(repo.git.diff("-U0", "--no-color", "--no-ext-diff", old.hexsha, new.hexsha))
    finally:
        repo.close()
    return [Hunk(int(m.group(1)), 1 if m.group(2) is None else int(m.group(2)),
                 int(m.group(3)), 1 if m.group(4) is None else int(m.group(4)))
            for m in _HUNK.finditer(diff)]
