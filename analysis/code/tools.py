"""File tools the agent and the localiser use, jailed to one checkout (`analysis.code.jail`).

Every tool returns a `ToolResult` and never raises: arguments come from a model and the repository is
untrusted, so a bad call or a hostile file (a symlink loop or one leading outside, a FIFO, socket or
device, an unreadable or huge file) gets a status and a message precise enough to correct the next
call; a failure nobody foresaw is reported the same way. Regexes run under a time limit. Results,
limits and the tools' JSON schemas are in `analysis.code.toolspec`.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import git
import regex

from analysis.code.gitlog import BlameLine, GitReadError, LogEntry, blame_lines, log_entries
from analysis.code.jail import Jail, Refused, shown_name
from analysis.code.toolspec import FileExcerpt, GrepMatch, Status, ToolLimits, ToolResult, ok, tool_specs

__all__ = ["FileExcerpt", "FileTools", "GrepMatch", "Status", "ToolLimits", "ToolResult", "pattern_items", "tool_specs"]

log = logging.getLogger(__name__)

_MAX_PATTERN_CHARS = 500
# `regex` writes out nested counted repeats when it compiles a pattern, outside any time limit:
# `((a{100}){100}){800}` (20 characters) took 2.3 GB. A pattern may expand to this many items, a class
# weighing its length: at most ~25 MB (100,000 full-case-folded `ß` took 114 MB).
_MAX_PATTERN_ITEMS = 20_000
_COUNT = re.compile(r"\{([0-9]*)(?:,([0-9]*))?\}")  # `regex` reads counts of any length, zeros first
# What `pattern_items` cannot read: comments (`(?#…)`, and `#…` in verbose mode) hide the pattern from it,
# VERSION1's set operations cost ~27 kB an item, and full case folding a class with `\w` in it as much
# (`(?fi)[a\w]{6660}` took 182 MB). A grep needs none of them.
_UNREAD = re.compile(r"\(\?#|\(\?[abefiLmprsuwxV01-]{0,16}(?:x|V1|f)")
# Matching keeps what each turn of a repeat captured, and more for a repeat that may backtrack: a
# pattern of 40 nested groups took ~2.7 kB a character searched (525 MB over a 2 MB file). Groups are
# made non-capturing (a grep shows lines, not groups), so what refers back to one is refused, and a text
# is searched a chunk of whole lines at a time: ~100 bytes a character over at most `_CHUNK_CHARS`.
_REFERS_BACK = re.compile(r"\\(?:[1-9]|g<|k<)|\(\?(?:P=|P>|&|R\)|[+-]?[0-9]|\((?!\?))")
_CHUNK_CHARS = 65_536
_F = TypeVar("_F", bound=Callable[..., ToolResult[Any]])


def pattern_items(pattern: str) -> int:
    """About how many items compiling `pattern` writes out: each atom one (a class its length), a counted
    repeat (`{n}`, `{n,m}`) multiplying what it repeats, a group, nested ones included, by its largest count."""
    sizes = [0]  # the size of each open group's contents so far, outermost first
    last = 0  # the size of the last atom, which a count multiplies
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "{" and last and (count := _COUNT.match(pattern, i)) and any(count.groups()):
            low, high = (int(bound) if bound else 0 for bound in count.groups(""))
            times = max(low + 1 if count.group(2) == "" else low, high)  # `{n,}` writes out n and a loop
            sizes[-1] += last * (times - 1)
            last *= times
            i = count.end()
            continue
        if char == "(":
            sizes.append(0)
            last, i = 0, i + 1
            continue
        if char == ")" and len(sizes) > 1:
            atom = max(sizes.pop(), 1)
            i += 1
        elif char == "[":  # a class is one atom, weighing its length (its ranges, case-folded, cost more)
            start = i
            i += 3 if pattern.startswith("[^]", i) else 2 if pattern.startswith("[]", i) else 1  # `]` first is one
            while i < n and pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
            atom, i = max(1, i - start - 1), i + 1
        else:
            atom, i = 1, i + (2 if char == "\\" else 1)
        sizes[-1] += atom
        last = atom
    return sum(sizes)


def without_captures(pattern: str) -> str:
    """`pattern` with every capturing group, named or not, non-capturing (what it matches is the same when
    nothing refers back to a group: `_REFERS_BACK`)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i : i + 2])
            i += 2
        elif char == "[":  # a class, copied whole: `(` in it is a character
            start = i
            i += 3 if pattern.startswith("[^]", i) else 2 if pattern.startswith("[]", i) else 1
            while i < n and pattern[i] != "]":
                if pattern.startswith("[:", i) and (end := pattern.find(":]", i + 2)) > 0:  # `[:digit:]`
                    i = end + 2
                else:
                    i += 2 if pattern[i] == "\\" else 1
            out.append(pattern[start : i + 1])
            i += 1
        elif char == "(" and not pattern.startswith(("(?", "(*"), i):
            out.append("(?:")
            i += 1
        elif pattern.startswith(("(?P<", "(?<"), i) and not pattern.startswith(("(?<=", "(?<!"), i):
            close = pattern.find(">", i)
            out.append("(?:")
            i = close + 1 if close > 0 else n
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _never_raises(tool: _F) -> _F:
    """The tool's result, or an error result naming what went wrong: a tool call never raises."""

    @functools.wraps(tool)
    def guarded(*args: Any, **kwargs: Any) -> ToolResult[Any]:
        try:
            return tool(*args, **kwargs)
        except Exception as error:  # the contract: a model's call, or a hostile file, never raises
            log.warning("file tool failed", exc_info=True)
            return ToolResult("error", f"{tool.__name__} failed: {type(error).__name__}: {str(error)[:200]}")

    return guarded  # type: ignore[return-value]  # same signature as the tool it wraps


class FileTools:
    """grep/read/list/log/blame over one checkout `root`; `files_read` records what was read successfully."""

    def __init__(
        self,
        root: Path,
        limits: ToolLimits | None = None,
        repo_dir: Path | None = None,
        commit: str | None = None,
        tracked: frozenset[str] | None = None,
    ) -> None:
        self.limits = limits or ToolLimits()
        self.jail = Jail(root, self.limits.max_file_bytes, tracked)  # `tracked`: a working tree's (see there)
        self.root = self.jail.root
        self.repo_dir = repo_dir
        self.commit = commit
        self.files_read: set[str] = set()

    # --- tools ----------------------------------------------------------------------------------------

    @_never_raises
    def read_file(
        self, path: str, start_line: int | None = None, end_line: int | None = None
    ) -> ToolResult[FileExcerpt]:
        """Numbered lines of a file (all, or `start_line`..`end_line`), capped at `max_file_chars`."""
        try:
            real, rel = self.jail.resolve(path)
            text = self.jail.read_text(real, rel or path)
        except Refused as exc:
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
        header = f"{shown_name(rel)} (lines {first}-{shown_last} of {total})"
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

    @_never_raises
    def list_directory(self, path: str = "") -> ToolResult[tuple[str, ...]]:
        """Sorted entries of a directory; directories end with '/'."""
        try:
            real, rel = self.jail.resolve(path)
        except Refused as exc:
            return ToolResult("error", str(exc))
        if not real.exists():
            return ToolResult("no_data", f"no directory {path!r} in the repository")
        if not real.is_dir():
            return ToolResult("error", f"{rel!r} is a file; use read_file")
        try:
            prefix = f"{rel}/" if rel else ""
            entries = sorted(
                shown_name(e.name) + ("/" if e.is_dir() and not e.is_symlink() else "")
                for e in real.iterdir()
                if e.name != ".git" and self.jail.visible(prefix + e.name)
            )
        except OSError as exc:
            return ToolResult("error", f"cannot list {path!r}: {exc.strerror or type(exc).__name__}")
        if not entries:
            return ToolResult("no_data", f"{rel or '.'} is empty")
        shown = entries[: self.limits.max_list_entries]
        more = f"\n[{len(entries) - len(shown)} more entries not shown]" if len(entries) > len(shown) else ""
        return ok(f"{rel or '.'}/\n" + "\n".join(shown) + more, tuple(entries), self.limits.max_output_chars)

    @_never_raises
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
        if _UNREAD.search(pattern):
            return ToolResult("error", "comments, verbose mode (x) and VERSION1 are not taken in a grep pattern; "
                                       "write the pattern plainly")
        if (items := pattern_items(pattern)) > _MAX_PATTERN_ITEMS:
            return ToolResult("error", f"pattern is too complex: its counted repeats expand to about {items:,} "
                                       f"items (limit {_MAX_PATTERN_ITEMS:,}); use + or * instead of nested {{n}}")
        if _REFERS_BACK.search(pattern):
            return ToolResult("error", "backreferences, group calls and conditions on a group (\\1, (?P=name), (?1), "
                                       "(?(1)…)) are not taken in a grep pattern; search for the text itself")
        try:
            regex.compile(pattern, regex.MULTILINE)  # the errors name places in the pattern as given
            compiled = regex.compile(without_captures(pattern), regex.MULTILINE)
        except regex.error as exc:
            return ToolResult(
                "error",
                f"invalid regex {pattern!r}: {exc.msg} at position {exc.pos}; escape "
                "special characters ( ) [ ] { } . * + ? | \\ with a backslash, "
                "or search for a plain word",
            )
        try:
            real, _ = self.jail.resolve(path)
        except Refused as exc:
            return ToolResult("error", str(exc))
        if not real.exists():
            return ToolResult("no_data", f"no file or directory {path!r} in the repository")
        if real.is_dir():
            suffixes = tuple("." + e for e in self._extensions(file_extension))
            skip = set(self.limits.skip_dirs) | {".git"}
            files = sorted(self.jail.files(real, suffixes, skip, self.limits.max_scan_files),
                           key=lambda p: p.relative_to(real).as_posix())
        else:
            files = [real]
        return self._grep(compiled, pattern, files)

    def _extensions(self, file_extension: str) -> tuple[str, ...]:
        wanted = str(file_extension or "").strip().lstrip("*").lstrip(".").lower()
        return (wanted,) if wanted else tuple(e.lower() for e in self.limits.extensions)

    def _grep(self, compiled: Any, pattern: str, files: list[Path]) -> ToolResult[tuple[GrepMatch, ...]]:
        deadline = _now() + self.limits.regex_timeout_s
        matches: list[GrepMatch] = []
        files_with_hits = 0
        more = 0
        skipped = 0
        for file in files:
            try:
                real, rel = self.jail.resolve(file.relative_to(self.root).as_posix())
                text = self.jail.read_text(real, rel)
            except (Refused, OSError):  # a symlink out, a FIFO, an unreadable file... named in the output
                skipped += 1
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
            for line_no, line_text in hits:
                if len(matches) >= self.limits.max_grep_lines:
                    more += 1
                    continue
                matches.append(GrepMatch(rel, line_no, line_text[: self.limits.max_line_chars]))
        unread = f"{skipped} files not read (not regular files, outside the repository or too large)"
        if not matches:
            searched = f"no match for {pattern!r} in {len(files) - skipped} files searched"
            return ToolResult("no_data", searched + (f"; {unread}" if skipped else ""))
        matches.sort(key=lambda m: (m.path, m.line))
        body = "\n".join(f"{shown_name(m.path)}:{m.line}: {m.text}" for m in matches)
        if more:
            body += f"\n[{more} more matches not shown; narrow the search with path= or file_extension=]"
        if skipped:
            body += f"\n[{unread}]"
        return ok(body, tuple(matches), self.limits.max_output_chars)

    def _grep_timeout(self, pattern: str) -> ToolResult[tuple[GrepMatch, ...]]:
        return ToolResult(
            "error",
            f"regex {pattern!r} took longer than {self.limits.regex_timeout_s:g}s "
            "(catastrophic backtracking?); use a simpler pattern without nested "
            "quantifiers like (a+)+",
        )

    @_never_raises
    def git_log(self, path: str) -> ToolResult[tuple[LogEntry, ...]]:
        """The last commits touching `path` (sha, date, author, summary), newest first."""
        try:
            _, rel = self.jail.resolve(path)
        except Refused as exc:
            return ToolResult("error", str(exc))
        if self.repo_dir is None or self.commit is None:
            return ToolResult("error", "git history is not available for this checkout")
        try:
            entries = log_entries(
                self.repo_dir, self.commit, rel, self.limits.max_log_entries, self.limits.git_timeout_s
            )
        except (git.GitError, OSError, ValueError) as exc:
            return ToolResult("error", f"git log failed for {rel!r}: {type(exc).__name__}")
        if not entries:
            return ToolResult("no_data", f"no commits touch {rel or '.'!r} at {self.commit[:12]}")
        body = "\n".join(f"{e.sha[:12]} {e.date} {e.author}: {e.summary}" for e in entries)
        return ok(body, tuple(entries), self.limits.max_output_chars)

    @_never_raises
    def blame(self, path: str, start_line: int, end_line: int) -> ToolResult[tuple[BlameLine, ...]]:
        """Who last changed lines `start_line`..`end_line` of `path`, at the analysed commit."""
        try:
            real, rel = self.jail.resolve(path)
            first, last = int(start_line), int(end_line)
        except Refused as exc:
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
            rows = blame_lines(self.repo_dir, self.commit, rel, first, last, self.limits.git_timeout_s,
                               self.limits.max_file_bytes)
        except GitReadError as exc:
            return ToolResult("error", f"cannot blame {rel}: {exc}")
        except (git.GitError, OSError, ValueError, KeyError) as exc:
            detail = " ".join(str(getattr(exc, "stderr", "") or "").split())[-200:] or type(exc).__name__
            return ToolResult("error", f"blame failed for {rel}:{first}-{last}: {detail}")
        if not rows:
            return ToolResult("no_data", f"no blame for {rel}:{first}-{last}")
        body = "\n".join(f"{r.line}: {r.sha[:12]} {r.date} {r.author}: {r.summary} | {r.text}" for r in rows)
        return ok(body, tuple(rows), self.limits.max_output_chars)

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


def _matching_lines(compiled: Any, text: str, timeout_s: float, cap: int) -> list[tuple[int, str]]:
    """(line number, text) of up to `cap` matching lines, grep-style (each line on its own); a line longer
    than `_CHUNK_CHARS` is not searched (minified code).

    Each chunk of whole lines is searched at once first, which skips chunks without a match cheaply; raises
    TimeoutError past the budget.
    """
    deadline = _now() + timeout_s
    lines = text.splitlines()
    hits: list[tuple[int, str]] = []
    start = 0
    while start < len(lines) and len(hits) < cap:
        end, size = start, 0
        while end < len(lines) and size + len(lines[end]) < _CHUNK_CHARS:
            size += len(lines[end]) + 1
            end += 1
        if end == start:  # a line longer than a chunk
            start += 1
            continue
        if compiled.search("\n".join(lines[start:end]), timeout=_left(deadline)) is not None:
            for number in range(start, end):
                if compiled.search(lines[number], timeout=_left(deadline)) is not None:
                    hits.append((number + 1, lines[number]))
                    if len(hits) >= cap:
                        break
        start = end
    return hits


def _left(deadline: float) -> float:
    """Seconds left before `deadline`; raises TimeoutError when there are none."""
    remaining = deadline - _now()
    if remaining <= 0:
        raise TimeoutError
    return remaining


def _now() -> float:
    return time.monotonic()
