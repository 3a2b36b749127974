"""File tools the agent and the localiser use, jailed to one checkout.

Every tool returns a `ToolResult` and never raises: arguments come from a model, so a bad call gets a
status and a message precise enough to correct the next call. Paths are resolved for real and must stay
inside the checkout (`Path.is_relative_to`, not a string prefix); `.git`, absolute paths, NUL bytes,
binary files and symlinks leading outside are refused. Regexes run under a time limit.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Generic, Literal, TypeVar

import git
import regex
from pydantic import BaseModel, Field

from analysis.code.gitlog import BlameLine, LogEntry, blame_lines, log_entries

Status = Literal["ok", "no_data", "error"]
T = TypeVar("T")

_DEFAULT_EXTENSIONS = (
    "java",
    "kt",
    "scala",
    "py",
    "ts",
    "tsx",
    "js",
    "go",
    "rb",
    "cs",
    "xml",
    "yml",
    "yaml",
    "properties",
    "toml",
    "json",
)
_DEFAULT_SKIP_DIRS = (
    "node_modules",
    "vendor",
    "target",
    "build",
    "dist",
    ".venv",
    "venv",
    "__pycache__",
    ".gradle",
    ".idea",
    ".git",
    ".mypy_cache",
    ".pytest_cache",
    ".tox",
    "bower_components",
    "out",
    ".next",
    "coverage",
)
_BINARY_SNIFF_BYTES = 8192
_MAX_PATTERN_CHARS = 500


@dataclass(frozen=True, slots=True)
class ToolResult(Generic[T]):
    """What a tool call returns: `output` is the capped text for the model, `data` the structured result."""

    status: Status
    output: str
    data: T | None = None


@dataclass(frozen=True, slots=True)
class GrepMatch:
    """One matching line."""

    path: str
    line: int
    text: str


@dataclass(frozen=True, slots=True)
class FileExcerpt:
    """Lines `start_line`..`end_line` (1-based, inclusive) of a file of `total_lines` lines."""

    path: str
    start_line: int
    end_line: int
    total_lines: int
    lines: tuple[str, ...]


class ToolLimits(BaseModel):
    """Caps that keep tool output small and tool time bounded."""

    max_file_chars: int = 20_000
    max_file_bytes: int = Field(2_000_000, description="Larger files are refused (minified bundles, dumps).")
    max_grep_files: int = Field(200, description="Files with matches listed at most.")
    max_grep_lines: int = Field(100, description="Matching lines listed at most.")
    max_scan_files: int = Field(20_000, description="Files grep looks at before giving up.")
    max_output_chars: int = 8_000
    max_line_chars: int = 300
    max_list_entries: int = 500
    max_log_entries: int = 10
    regex_timeout_s: float = Field(1.0, description="Time budget of one grep call across all files.")
    git_timeout_s: float = 10.0
    extensions: tuple[str, ...] = _DEFAULT_EXTENSIONS
    skip_dirs: tuple[str, ...] = _DEFAULT_SKIP_DIRS


class _Refused(Exception):
    """A path argument the jail refuses; the message is shown to the model."""


def _ok(output: str, data: T, limit: int) -> ToolResult[T]:
    return ToolResult("ok", _cap(output, limit), data)


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit)
    cut = cut if cut > 0 else limit
    return text[:cut] + f"\n[output truncated at {cut} of {len(text)} characters]"


class FileTools:
    """grep/read/list/log/blame over one checkout `root`; `files_read` records what was read successfully."""

    def __init__(
        self,
        root: Path,
        limits: ToolLimits | None = None,
        repo_dir: Path | None = None,
        commit: str | None = None,
    ) -> None:
        self.root = root.resolve()
        self.limits = limits or ToolLimits()
        self.repo_dir = repo_dir
        self.commit = commit
        self.files_read: set[str] = set()

    # --- the jail -------------------------------------------------------------------------------------

    def _resolve(self, path: str) -> tuple[Path, str]:
        """The real path inside the jail and its repo-relative posix form; raises _Refused."""
        if not isinstance(path, str):
            raise _Refused("path must be a string")
        if "\x00" in path:
            raise _Refused("path contains a NUL byte")
        raw = path.strip().replace("\\", "/")
        if raw.startswith("/") or (len(raw) > 1 and raw[0].isalpha() and raw[1] == ":"):
            raise _Refused(
                f"absolute paths are not allowed ({path!r}); give a path relative to the "
                "repository root, e.g. 'src/app.py' (use grep_files to find a file by name)"
            )
        parts = PurePosixPath(raw).parts if raw not in ("", ".") else ()
        if ".git" in parts:
            raise _Refused("the .git directory is not readable")
        real = (self.root / raw).resolve()
        if not real.is_relative_to(self.root):
            raise _Refused(f"path {path!r} leads outside the repository")
        rel = real.relative_to(self.root)
        if ".git" in rel.parts:
            raise _Refused("the .git directory is not readable")
        return real, rel.as_posix() if rel.parts else ""

    def _read_text(self, real: Path, shown: str) -> str:
        if not real.exists():
            raise FileNotFoundError(shown)
        if real.is_dir():
            raise _Refused(f"{shown!r} is a directory; use list_directory")
        size = real.stat().st_size
        if size > self.limits.max_file_bytes:
            raise _Refused(f"{shown!r} is too large ({size} bytes; limit {self.limits.max_file_bytes})")
        data = real.read_bytes()
        if b"\x00" in data[:_BINARY_SNIFF_BYTES]:
            raise _Refused(f"{shown!r} is a binary file")
        return data.decode("utf-8", errors="replace")

    # --- tools ----------------------------------------------------------------------------------------

    def read_file(
        self, path: str, start_line: int | None = None, end_line: int | None = None
    ) -> ToolResult[FileExcerpt]:
        """Numbered lines of a file (all, or `start_line`..`end_line`), capped at `max_file_chars`."""
        try:
            real, rel = self._resolve(path)
            text = self._read_text(real, rel or path)
        except _Refused as exc:
            return ToolResult("error", str(exc))
        except FileNotFoundError:
            return ToolResult(
                "no_data",
                f"no file {path!r} in the repository; use list_directory or "
                "grep_files to find the right path",
            )
        except OSError as exc:
            return ToolResult("error", f"cannot read {path!r}: {exc.strerror or type(exc).__name__}")
        lines = text.splitlines()
        total = len(lines)
        if total == 0:
            return ToolResult("no_data", f"{rel} is empty")
        try:
            first = 1 if start_line is None else int(start_line)
            last = total if end_line is None else min(int(end_line), total)
        except (TypeError, ValueError):
            return ToolResult("error", "start_line and end_line must be integers")
        if first < 1 or first > total:
            return ToolResult("error", f"start_line {first} is outside {rel} (lines 1-{total})")
        if last < first:
            return ToolResult("error", f"end_line {last} is before start_line {first}")
        width = len(str(last))
        out: list[str] = []
        used = 0
        shown_last = first - 1
        for number in range(first, last + 1):
            row = f"{number:>{width}}| {lines[number - 1]}"
            if used + len(row) + 1 > self.limits.max_file_chars and out:
                break
            out.append(row)
            used += len(row) + 1
            shown_last = number
        header = f"{rel} (lines {first}-{shown_last} of {total})"
        footer = ""
        if shown_last < last:
            footer = (
                f"\n[truncated at line {shown_last}; call read_file with start_line={shown_last + 1} "
                "to continue]"
            )
        self.files_read.add(rel)
        lexical = os.path.normpath(path.strip()).replace("\\", "/")
        if lexical != rel and not lexical.startswith("../"):
            self.files_read.add(lexical)  # the name the caller used, when a symlink led elsewhere
        excerpt = FileExcerpt(rel, first, shown_last, total, tuple(lines[first - 1 : shown_last]))
        # The body is already capped by max_file_chars (whole source files are what the model needs most).
        return ToolResult("ok", header + "\n" + "\n".join(out) + footer, excerpt)

    def list_directory(self, path: str = "") -> ToolResult[tuple[str, ...]]:
        """Sorted entries of a directory; directories end with '/'."""
        try:
            real, rel = self._resolve(path)
        except _Refused as exc:
            return ToolResult("error", str(exc))
        if not real.exists():
            return ToolResult("no_data", f"no directory {path!r} in the repository")
        if not real.is_dir():
            return ToolResult("error", f"{rel!r} is a file; use read_file")
        try:
            entries = sorted(
                e.name + ("/" if e.is_dir() and not e.is_symlink() else "")
                for e in real.iterdir()
                if e.name != ".git"
            )
        except OSError as exc:
            return ToolResult("error", f"cannot list {path!r}: {exc.strerror or type(exc).__name__}")
        if not entries:
            return ToolResult("no_data", f"{rel or '.'} is empty")
        shown = entries[: self.limits.max_list_entries]
        more = f"\n[{len(entries) - len(shown)} more entries not shown]" if len(entries) > len(shown) else ""
        return _ok(f"{rel or '.'}/\n" + "\n".join(shown) + more, tuple(entries), self.limits.max_output_chars)

    def grep_files(
        self, pattern: str, path: str = "", file_extension: str = ""
    ) -> ToolResult[tuple[GrepMatch, ...]]:
        """Lines matching a regex, as sorted `path:line: text`, under `path`, in source and config files."""
        if not isinstance(pattern, str) or not pattern:
            return ToolResult("error", "pattern is empty; give a regular expression or a plain word")
        if len(pattern) > _MAX_PATTERN_CHARS:
            return ToolResult(
                "error", f"pattern is too long ({len(pattern)} chars; limit {_MAX_PATTERN_CHARS})"
            )
        try:
            compiled = regex.compile(pattern, regex.MULTILINE)
        except regex.error as exc:
            return ToolResult(
                "error",
                f"invalid regex {pattern!r}: {exc.msg} at position {exc.pos}; escape "
                "special characters ( ) [ ] { } . * + ? | \\ with a backslash, "
                "or search for a plain word",
            )
        try:
            real, _ = self._resolve(path)
        except _Refused as exc:
            return ToolResult("error", str(exc))
        if not real.exists():
            return ToolResult("no_data", f"no file or directory {path!r} in the repository")
        extensions = self._extensions(file_extension)
        files = [real] if real.is_file() else self._source_files(real, extensions)
        return self._grep(compiled, pattern, files)

    def _extensions(self, file_extension: str) -> tuple[str, ...]:
        wanted = str(file_extension or "").strip().lstrip("*").lstrip(".").lower()
        return (wanted,) if wanted else tuple(e.lower() for e in self.limits.extensions)

    def _source_files(self, top: Path, extensions: tuple[str, ...]) -> list[Path]:
        """Files under `top` with a wanted extension, skipping vendored/build dirs, sorted by path."""
        found: list[Path] = []
        skip = set(self.limits.skip_dirs) | {".git"}
        suffixes = tuple("." + e for e in extensions)
        for dirpath, dirnames, filenames in os.walk(top):  # does not follow symlinked dirs
            dirnames[:] = [d for d in dirnames if d not in skip]
            for name in filenames:
                if name.lower().endswith(suffixes):
                    found.append(Path(dirpath) / name)
            if len(found) >= self.limits.max_scan_files:
                break
        found.sort(key=lambda p: p.relative_to(top).as_posix())
        return found[: self.limits.max_scan_files]

    def _grep(self, compiled: Any, pattern: str, files: list[Path]) -> ToolResult[tuple[GrepMatch, ...]]:
        deadline = _now() + self.limits.regex_timeout_s
        matches: list[GrepMatch] = []
        files_with_hits = 0
        more = 0
        for file in files:
            real = file.resolve()
            if not real.is_relative_to(self.root) or ".git" in real.relative_to(self.root).parts:
                continue  # a symlink leading outside the jail
            try:
                text = self._read_text(real, "")
            except (_Refused, OSError):
                continue
            remaining = deadline - _now()
            if remaining <= 0:
                return self._grep_timeout(pattern)
            try:
                hits = _matching_lines(compiled, text, remaining, self.limits.max_grep_lines + 1)
            except TimeoutError:
                return self._grep_timeout(pattern)
            if not hits:
                continue
            files_with_hits += 1
            if files_with_hits > self.limits.max_grep_files:
                more += len(hits)
                continue
            rel = real.relative_to(self.root).as_posix()
            for line_no, line_text in hits:
                if len(matches) >= self.limits.max_grep_lines:
                    more += 1
                    continue
                matches.append(GrepMatch(rel, line_no, line_text[: self.limits.max_line_chars]))
        if not matches:
            return ToolResult("no_data", f"no match for {pattern!r} in {len(files)} files searched")
        matches.sort(key=lambda m: (m.path, m.line))
        body = "\n".join(f"{m.path}:{m.line}: {m.text}" for m in matches)
        if more:
            body += f"\n[{more} more matches not shown; narrow the search with path= or file_extension=]"
        return _ok(body, tuple(matches), self.limits.max_output_chars)

    def _grep_timeout(self, pattern: str) -> ToolResult[tuple[GrepMatch, ...]]:
        return ToolResult(
            "error",
            f"regex {pattern!r} took longer than {self.limits.regex_timeout_s:g}s "
            "(catastrophic backtracking?); use a simpler pattern without nested "
            "quantifiers like (a+)+",
        )

    def git_log(self, path: str) -> ToolResult[tuple[LogEntry, ...]]:
        """The last commits touching `path` (sha, date, author, summary), newest first."""
        try:
            _, rel = self._resolve(path)
        except _Refused as exc:
            return ToolResult("error", str(exc))
        if self.repo_dir is None or self.commit is None:
            return ToolResult("error", "git history is not available for this checkout")
        try:
            entries = log_entries(
                self.repo_dir, self.commit, rel, self.limits.max_log_entries, self.limits.git_timeout_s
            )
        except (git.GitCommandError, OSError, ValueError) as exc:
            return ToolResult("error", f"git log failed for {rel!r}: {type(exc).__name__}")
        if not entries:
            return ToolResult("no_data", f"no commits touch {rel or '.'!r} at {self.commit[:12]}")
        body = "\n".join(f"{e.sha[:12]} {e.date} {e.author}: {e.summary}" for e in entries)
        return _ok(body, tuple(entries), self.limits.max_output_chars)

    def blame(self, path: str, start_line: int, end_line: int) -> ToolResult[tuple[BlameLine, ...]]:
        """Who last changed lines `start_line`..`end_line` of `path`, at the analysed commit."""
        try:
            real, rel = self._resolve(path)
            first, last = int(start_line), int(end_line)
        except _Refused as exc:
            return ToolResult("error", str(exc))
        except (TypeError, ValueError):
            return ToolResult("error", "start_line and end_line must be integers")
        if self.repo_dir is None or self.commit is None:
            return ToolResult("error", "git history is not available for this checkout")
        if not real.is_file():
            return ToolResult("no_data", f"no file {path!r} in the repository")
        if first < 1 or last < first:
            return ToolResult("error", f"bad line range {first}-{last}; lines start at 1 and end >= start")
        try:
            rows = blame_lines(self.repo_dir, self.commit, rel, first, last, self.limits.git_timeout_s)
        except (git.GitCommandError, OSError, ValueError, KeyError) as exc:
            detail = " ".join(str(getattr(exc, "stderr", "") or "").split())[-200:] or type(exc).__name__
            return ToolResult("error", f"blame failed for {rel}:{first}-{last}: {detail}")
        if not rows:
            return ToolResult("no_data", f"no blame for {rel}:{first}-{last}")
        body = "\n".join(f"{r.line}: {r.sha[:12]} {r.date} {r.author}: {r.summary} | {r.text}" for r in rows)
        return _ok(body, tuple(rows), self.limits.max_output_chars)

    # --- binding --------------------------------------------------------------------------------------

    def as_callables(self) -> dict[str, Callable[..., ToolResult[Any]]]:
        """The tools by name, for binding to a model (see `tool_specs` for their argument schemas)."""
        return {
            "grep_files": self.grep_files,
            "read_file": self.read_file,
            "list_directory": self.list_directory,
            "git_log": self.git_log,
            "blame": self.blame,
        }


def tool_specs() -> list[dict[str, Any]]:
    """Name, description and JSON-schema parameters of each tool, in the order of `as_callables`."""

    def obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return {"type": "object", "properties": props, "required": required}

    path = {"type": "string", "description": "Path relative to the repository root, e.g. 'src/app.py'."}
    line = {"type": "integer", "minimum": 1}
    return [
        {
            "name": "grep_files",
            "description": "Search source and config files for a regular expression; returns sorted "
            "'path:line: text' lines.",
            "parameters": obj(
                {
                    "pattern": {"type": "string", "description": "Regular expression."},
                    "path": {**path, "description": "Directory or file to search (default: all)."},
                    "file_extension": {
                        "type": "string",
                        "description": "Only files ending with this extension, e.g. 'py'.",
                    },
                },
                ["pattern"],
            ),
        },
        {
            "name": "read_file",
            "description": "Read a file's numbered lines, optionally only start_line..end_line.",
            "parameters": obj({"path": path, "start_line": line, "end_line": line}, ["path"]),
        },
        {
            "name": "list_directory",
            "description": "List a directory of the repository (directories end with '/').",
            "parameters": obj({"path": {**path, "description": "Directory (default: repository root)."}}, []),
        },
        {
            "name": "git_log",
            "description": "Recent commits that touched a file or directory: sha, date, author, summary.",
            "parameters": obj({"path": path}, ["path"]),
        },
        {
            "name": "blame",
            "description": "The commit that last changed each line of start_line..end_line of a file.",
            "parameters": obj(
                {"path": path, "start_line": line, "end_line": line}, ["path", "start_line", "end_line"]
            ),
        },
    ]


def _matching_lines(compiled: Any, text: str, timeout_s: float, cap: int) -> list[tuple[int, str]]:
    """(line number, text) of up to `cap` matching lines, grep-style (each line on its own).

    A whole-text search first skips files without any match cheaply; raises TimeoutError past the budget.
    """
    deadline = _now() + timeout_s
    if compiled.search(text, timeout=timeout_s) is None:
        return []
    hits: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        remaining = deadline - _now()
        if remaining <= 0:
            raise TimeoutError
        if compiled.search(line, timeout=remaining) is not None:
            hits.append((number, line))
            if len(hits) >= cap:
                break
    return hits


def _now() -> float:
    return time.monotonic()
