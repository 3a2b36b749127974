"""Report validation against git objects: cited paths and lines must exist at the analysed commit.

Everything here reads the commit's tree, not the worktree, so a citation is pinned to the blob it names.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from pathlib import Path

from analysis.code.linemap import file_hunks
from analysis.code.repo import Checkout, open_repo
from analysis.report import Citation, CitationRef, Fix, Location

_SYMLINK_MODE = 0o120000


def normalise_path(path: str, root: Path | None = None) -> str | None:
    """A clean repo-relative posix path, or None when it is absolute (outside `root`), escaping or empty.

    An absolute path under the checkout root is made relative (models sometimes echo full paths).
    """
    raw = path.strip().replace("\\", "/")
    if "\x00" in raw or not raw:
        return None
    if raw.startswith("/"):
        if root is None:
            return None
        prefix = root.resolve().as_posix().rstrip("/") + "/"
        if not raw.startswith(prefix):
            return None
        raw = raw[len(prefix) :]
    clean = posixpath.normpath(raw)
    if clean in (".", "") or clean == ".." or clean.startswith("../"):
        return None
    if ".git" in clean.split("/"):
        return None
    return clean


class _Tree:
    """Blob lookups at one commit, cached for the duration of one validation."""

    def __init__(self, checkout: Checkout) -> None:
        self._repo = open_repo(checkout.repo_dir)
        self._commit = self._repo.commit(checkout.commit)
        self._cache: dict[str, tuple[str, list[str]] | None] = {}

    def blob(self, path: str) -> tuple[str, list[str]] | None:
        """(blob sha, lines) of `path`, or None when the commit has no such file."""
        if path not in self._cache:
            try:
                obj = self._commit.tree / path
            except KeyError:
                self._cache[path] = None
            else:
                if obj.type != "blob" or obj.mode == _SYMLINK_MODE:  # a symlink's blob is its target's name
                    self._cache[path] = None
                else:
                    text = obj.data_stream.read().decode("utf-8", errors="replace")
                    self._cache[path] = (obj.hexsha, text.splitlines())
        return self._cache[path]

    def close(self) -> None:
        self._repo.close()


def validate_citations(
    refs: Sequence[CitationRef], checkout: Checkout, files_read: set[str] | None = None
) -> tuple[list[Citation], list[str]]:
    """Keep citations whose path and lines exist at the commit (and were read, when `files_read` is given).

    Returns the kept citations pinned to commit and blob sha, and why the others were dropped (each reason once).
    Duplicates are kept once.
    """
    tree = _Tree(checkout)
    kept: list[Citation] = []
    dropped: list[str] = []
    seen: set[tuple[str, int, int]] = set()
    try:
        for ref in refs:
            path = normalise_path(ref.path, checkout.root)
            if path is None:
                dropped.append(f"{ref.path!r}: not a path inside the repository")
                continue
            blob = tree.blob(path)
            if blob is None:
                dropped.append(f"{path}: no such file at {checkout.commit[:12]}")
                continue
            if checkout.other_lines(path):  # read in a working tree, where its lines are not the blob's
                dropped.append(f"{path}: changed since {checkout.commit[:12]}, so its lines cannot be cited there")
                continue
            sha, lines = blob
            if ref.end_line < ref.start_line or ref.end_line > len(lines):
                dropped.append(f"{path}:{ref.start_line}-{ref.end_line}: outside the file (1-{len(lines)})")
                continue
            if files_read is not None and path not in files_read:
                dropped.append(f"{path}: cited but never read")
                continue
            key = (path, ref.start_line, ref.end_line)
            if key not in seen:
                seen.add(key)
                kept.append(
                    Citation(
                        path=path,
                        start_line=ref.start_line,
                        end_line=ref.end_line,
                        commit=checkout.commit,
                        blob_sha=sha,
                    )
                )
    finally:
        tree.close()
    return kept, list(dict.fromkeys(dropped))  # a file changed or missing is said once, however often cited


def _file_lines(path: str, checkout: Checkout) -> tuple[str | None, list[str] | None, str | None]:
    """Normalised path and lines of `path` at the commit, or why it cannot be read there."""
    normal = normalise_path(path, checkout.root)
    if normal is None:
        return None, None, f"{path!r} is not a path inside the repository"
    tree = _Tree(checkout)
    try:
        blob = tree.blob(normal)
    finally:
        tree.close()
    if blob is None:
        return normal, None, f"{normal}: no such file at {checkout.commit[:12]}"
    return normal, blob[1], None


def validate_location(loc: Location, checkout: Checkout) -> tuple[Location | None, str | None]:
    """The location, path normalised, when it exists at the commit (line inside the file); else why not."""
    path, lines, why = _file_lines(loc.path, checkout)
    if lines is None:
        return None, why
    if loc.line is not None and loc.line > len(lines):
        return None, f"{path}:{loc.line}: outside the file (1-{len(lines)})"
    return loc.model_copy(update={"path": path}), None


def validate_fix(fix: Fix, checkout: Checkout) -> tuple[Fix | None, str | None]:
    """The fix when its `before` text exists in the file at the commit (whitespace-tolerant), else a note."""
    path, lines, why = _file_lines(fix.path, checkout)
    if lines is None:
        return None, f"fix dropped: {why}"
    if not fix.before.strip():
        return None, f"fix dropped: no 'before' code given for {path}"
    if _squash(fix.before) not in _squash("\n".join(lines)):
        return None, f"fix dropped: its 'before' code is not in {path}"
    return fix.model_copy(update={"path": path}), None


def _squash(text: str) -> str:
    """Whitespace-insensitive form: models re-indent code they quote."""
    return " ".join(text.split())


def citation_changed(
    repo_dir: Path, path: str, start: int, end: int, from_commit: str, to_commit: str
) -> bool:
    """Whether lines `start`..`end` of `path` at `from_commit` changed by `to_commit`.

    True when a diff hunk touches the range, the file is gone, or either commit is unknown (unverifiable
    citations count as changed).
    """
    hunks = file_hunks(repo_dir, path, from_commit, to_commit)
    if hunks is None:
        return True
    for hunk in hunks:
        if hunk.old_count == 0:
            # Pure insertion after line old_start: it changes the range only when it lands inside it.
            if start <= hunk.old_start < end:
                return True
        elif hunk.old_start <= end and hunk.old_start + hunk.old_count - 1 >= start:
            return True
    return False
