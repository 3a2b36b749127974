"""Git history reads for the tools and the localiser: `git log` of a path and `git blame` of a line range."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import git

from analysis.code.repo import open_repo

_PORCELAIN_HEADER = re.compile(r"^([0-9a-f]{40}) (\d+) (\d+)(?: \d+)?$")
_FIELD_SEP = "\x1f"
_REGULAR_MODES = (0o100644, 0o100755, 0o100664)  # git's regular files; 0o120000 is a symlink, 0o160000 a submodule


class GitReadError(ValueError):
    """The path cannot be read at the commit as a file; the message says why, for the model."""


@dataclass(frozen=True, slots=True)
class LogEntry:
    """A commit that touched a path."""

    sha: str
    date: str
    author: str
    summary: str


@dataclass(frozen=True, slots=True)
class BlameLine:
    """The commit that last changed one line; `line` is the line number at the blamed commit."""

    line: int
    sha: str
    date: str
    author: str
    summary: str
    text: str


def log_entries(repo_dir: Path, commit: str, path: str, limit: int, timeout_s: float) -> list[LogEntry]:
    """The last `limit` commits reachable from `commit` touching `path` (repo-relative), newest first."""
    repo = open_repo(repo_dir)
    try:
        fmt = _FIELD_SEP.join(("%H", "%aI", "%an", "%s"))
        out = repo.git.log(
            f"-n{int(limit)}", f"--format={fmt}", commit, "--", path or ".", kill_after_timeout=timeout_s
        )
    finally:
        repo.close()
    entries = []
    for row in str(out).splitlines():
        fields = row.split(_FIELD_SEP)
        if len(fields) == 4:
            entries.append(LogEntry(*fields))
    return entries


def blame_lines(
    repo_dir: Path, commit: str, path: str, start: int, end: int, timeout_s: float, max_bytes: int = 2_000_000
) -> list[BlameLine]:
    """Porcelain blame of `start`..`end` (clamped to the file) of `path` at `commit`; a path that is no
    regular file of at most `max_bytes` there (a symlink, a submodule, a directory) raises GitReadError."""
    repo = open_repo(repo_dir)
    try:
        total = _line_count(repo, commit, path, max_bytes)
        if total == 0 or start > total:
            return []
        out = repo.git.blame(
            "--porcelain",
            "-L",
            f"{start},{min(end, total)}",
            commit,
            "--",
            path,
            kill_after_timeout=timeout_s,
        )
    finally:
        repo.close()
    return _parse_porcelain(str(out))


def _line_count(repo: git.Repo, commit: str, path: str, max_bytes: int) -> int:
    try:
        entry = repo.commit(commit).tree / path
    except KeyError:
        raise GitReadError(f"no file {path!r} at {commit[:12]}") from None
    if entry.type != "blob" or entry.mode not in _REGULAR_MODES:
        kind = {"tree": "a directory", "commit": "a submodule"}.get(entry.type, "a symlink")
        raise GitReadError(f"{path!r} is {kind} at {commit[:12]}, not a file")
    if entry.size > max_bytes:
        raise GitReadError(f"{path!r} is too large to blame ({entry.size} bytes; limit {max_bytes})")
    return len(entry.data_stream.read().decode("utf-8", errors="replace").splitlines())


def _parse_porcelain(out: str) -> list[BlameLine]:
    """Parse `git blame --porcelain`: commit headers carry fields once, each line a tab-prefixed row."""
    info: dict[str, dict[str, str]] = {}
    rows: list[BlameLine] = []
    sha = ""
    final_line = 0
    for raw in out.splitlines():
        header = _PORCELAIN_HEADER.match(raw)
        if header:
            sha, final_line = header.group(1), int(header.group(3))
            info.setdefault(sha, {})
        elif raw.startswith("\t"):
            fields = info.get(sha, {})
            rows.append(
                BlameLine(
                    final_line,
                    sha,
                    fields.get("date", ""),
                    fields.get("author", ""),
                    fields.get("summary", ""),
                    raw[1:],
                )
            )
        elif sha:
            key, _, value = raw.partition(" ")
            if key == "author":
                info[sha]["author"] = value
            elif key == "author-time" and value.isdigit():
                info[sha]["date"] = datetime.fromtimestamp(int(value), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            elif key == "summary":
                info[sha]["summary"] = value
    return rows


_HUNK_NEW = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


def changed_lines(repo_dir: Path, since: str | None, commit: str, timeout_s: float) -> tuple[str, dict[str, list[int]]]:
    """The files changed from `since` to `commit` with the first line of each change (in `commit`'s
    numbering), and the commit compared against. Without `since`, `commit`'s first parent is used;
    a root commit has no history: ('', {})."""
    repo = open_repo(repo_dir)
    try:
        base = since or next((str(p.hexsha) for p in repo.commit(commit).parents[:1]), "")
        if not base:
            return "", {}
        out = str(repo.git.diff("-U0", "--no-color", "--no-ext-diff", "--no-renames", base, commit,
                                kill_after_timeout=timeout_s))
    finally:
        repo.close()
    changed: dict[str, list[int]] = {}
    path = ""
    for row in out.splitlines():
        if row.startswith("+++ "):
            path = row[6:] if row.startswith("+++ b/") else ""
            if path:
                changed.setdefault(path, [])
        elif path and (hunk := _HUNK_NEW.match(row)):
            start, count = int(hunk.group(1)), 1 if hunk.group(2) is None else int(hunk.group(2))
            changed[path].append(max(start, 1) if count else max(start + 1, 1))
    return base, changed
