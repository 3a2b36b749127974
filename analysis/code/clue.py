"""Suspect files the frames do not name: what the exception's message names, what a test frame called,
the constant a fault read (and the data file it is loaded from).

These are the whole answer when no frame of the trace is application code (a refused connection raised
from the runtime, a missing file reported by a callback), and extra suspects beside the frames
otherwise, since a fix often lives in a file the trace never entered (a renamed export, a constant, a
configuration file). Everything is found by searching the checkout with the file tools.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from analysis.code.filemap import FileIndex, is_generated_path, is_test_path
from analysis.code.site import SourceReader, code_name
from analysis.code.tools import FileTools
from analysis.event import ErrorEvent

_TERM = re.compile(
    r"'([^'\s]{2,120})'|\"([^\"\s]{2,120})\"|`([^`\s]{2,120})`"  # quoted names and paths
    r"|(?<![\w./-])((?:/|\.{1,2}/)?(?:[\w.-]++/)++[\w.-]+\.\w{1,10})\b"  # paths
    r"|(?<![\w$])([A-Za-z_][\w$]*+(?:\.[A-Za-z_$][\w$]*+)++)"  # dotted names: modules, classes, members
    r"|\b([a-z][a-z0-9]*(?:_[a-z0-9]+)+|[a-z]+[A-Z]\w*|[A-Z][a-z0-9]+[A-Z]\w*|[A-Z][A-Z0-9]*_[A-Z0-9_]+)\b"
    r"|(?<=:)(\d{2,5})\b"  # a port
)
# Names every runtime prints that say nothing about this application.
_COMMON = frozenset((
    "NoneType", "str", "int", "float", "dict", "list", "tuple", "set", "object", "bytes", "bool", "undefined",
    "null", "function", "Object", "Array", "String", "Number", "Symbol", "Promise", "Error", "TypeError",
    "ValueError", "KeyError", "NullPointerException", "java.lang", "node:internal", "self", "this", "e.g", "i.e",
))
_RUNTIME_NAMESPACE = re.compile(
    r"^(?:java|javax|jdk|sun|com\.sun|kotlin|scala|org\.junit|junit|builtins|node|internal)\."
)
_SOURCE_FILE = re.compile(
    r"\.(?:py|js|mjs|cjs|ts|tsx|jsx|java|kt|scala|go|rb|cs|json|ya?ml|toml|ini|cfg|conf|properties|env|xml)$"
)
_DATA_FILE = re.compile(r"[\"']([\w./-]+\.(?:json|ya?ml|toml|ini|cfg|conf|properties|env|xml))[\"']")
_CALL = re.compile(r"(?<![\w$.])([A-Za-z_$][\w$]*)\s*\(|\.([A-Za-z_$][\w$]*)\s*\(")
_TEST_HELPERS = re.compile(r"^(?:assert\w*|expect|describe|it|test|fail|mock\w*|patch|raises|print|len|str|int|new)$")
_MAX_TERMS = 8
_MAX_FILES_PER_TERM = 10


@dataclass
class Clue:
    """A suspect line found without a frame, with why."""

    path: str
    line: int | None
    score: float
    reasons: list[str] = field(default_factory=list)


def message_terms(text: str, distinctive: bool = False) -> list[tuple[str, bool]]:
    """(term, quoted) for the names, paths and ports an error message mentions, in order. `distinctive`:
    only quoted names, paths and dotted names outside the runtimes' own namespaces (bare words such as
    `cause` or `NaN` say little)."""
    found: list[str] = []
    quoted: set[str] = set()
    for match in _TERM.finditer(text):
        port = match.group(7)
        term = (port or next(g for g in match.groups() if g)).strip(".,;:()[]")
        if not term or term in _COMMON or term in found or _RUNTIME_NAMESPACE.match(term):
            continue
        if not port and re.fullmatch(r"[\d.:]+", term):
            continue  # numbers and addresses say nothing by themselves
        if distinctive and not (match.group(1) or match.group(2) or match.group(3) or match.group(4)
                                or match.group(5)):
            continue
        found.append(term)
        if match.group(1) or match.group(2) or match.group(3):
            quoted.add(term)
    return [(t, t in quoted) for t in found[:_MAX_TERMS]]


def definition_regex(name: str) -> str:
    """A regex finding where `name` is defined, in any of the languages read (function, class, constant, key)."""
    n = re.escape(name)
    return (
        rf"^\s*(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:def|class|function\*?|func|interface|enum|record|struct"
        rf"|type|object|trait)\s+(?:\([^)]*\)\s*)?{n}\b"
        rf"|^\s*(?:export\s+)?(?:const|let|var|val)\s+{n}\s*[=:]"
        rf"|^\s*(?:(?:public|protected|private|static|final|readonly|internal)\s+)+[\w<>\[\], ?.]+\s+{n}\s*[=;(]"
        rf"|^\s*[\"']?{n}[\"']?\s*[:=](?!=)"
        rf"|^\s*(?:static\s+|async\s+)*{n}\s*\([^)]*\)\s*\{{"
    )


class ClueFinder:
    """Searches one checkout for the files a message, a test frame or a constant points at."""

    def __init__(self, tools: FileTools, index: FileIndex, reader: SourceReader) -> None:
        self._tools = tools
        self._index = index
        self._reader = reader
        self._hits: dict[str, list[tuple[str, int, str]]] = {}

    def from_message(self, message: str, base: float, distinctive: bool) -> list[Clue]:
        """Files the message names, files defining what it names, files mentioning it (rarer counts more)."""
        clues: list[Clue] = []
        for term, quoted in message_terms(message, distinctive):
            strength = base if quoted or not distinctive else base * 0.5  # an unquoted name is often incidental
            if "/" in term or _SOURCE_FILE.search(term):
                clues += self._files_named(term, strength, f"the message names {term}")
                clues += self._mentions(term, strength * 0.7, f"refers to {term}, which the message names")
                basename = term.rsplit("/", 1)[-1]
                if basename != term and len(basename) > 2:  # code names a file by its last parts (not `a` of `n/a`)
                    clues += self._mentions(basename, strength * 0.6, f"refers to {basename}, which the message names")
                continue
            dotted = term.split("$", 1)[0]
            head, _, tail = dotted.rpartition(".")
            module = self._module(dotted, strength, f"the message names {term}") if head else []
            if not module and head:
                module = self._module(head, strength, f"the message names {term}")
                module = [self._member(c, tail) for c in module]
            if module:
                clues += module
                continue
            name = tail or term
            defined = self.definitions(name, strength * 0.9, f"defines {name}, which the message names")
            lines = {(clue.path, clue.line) for clue in defined}  # a definition uses its name too: said once
            clues += defined + [clue for clue in self._mentions(name, strength * 0.6, f"uses {name}, which the message "
                                                                "names") if (clue.path, clue.line) not in lines]
        return clues

    def _member(self, clue: Clue, name: str) -> Clue:
        """The module clue, pointed at the line that defines `name` in it when there is one."""
        source = self._reader.source(clue.path)
        defining = re.compile(definition_regex(name))
        line = next((n for n, text in enumerate(source.code, 1) if defining.search(text)), None) if source else None
        if line is None:
            return clue
        *others, named = clue.reasons
        return Clue(clue.path, line, clue.score, [*others, f"{named}, defined at {clue.path}:{line}"])

    def constant(self, name: str, strength: float, why: str) -> list[Clue]:
        """Where a constant is defined, and the data file it is loaded from when its definition names one."""
        clues = self.definitions(name, strength, why)
        for clue in list(clues):
            source = self._reader.source(clue.path)
            text = source.statement_text(clue.line, masked=False) if source and clue.line else ""
            for quoted in _DATA_FILE.findall(text):
                where = f"{clue.path}:{clue.line}"
                clues += self._files_named(quoted, strength, f"{name} is loaded from {quoted} ({where})")
        return clues

    def from_test_frames(self, event: ErrorEvent, strength: float) -> list[Clue]:
        """Definitions of what the trace's test frames called (the entry into the application)."""
        clues: list[Clue] = []
        for exc in event.exceptions:
            for frame in exc.frames:
                match = self._index.locate(frame)
                if match is None or not is_test_path(match.path) or not frame.lineno:
                    continue
                source = self._reader.source(match.path)
                line = source.masked(frame.lineno) if source else ""
                for name in dict.fromkeys(a or b for a, b in _CALL.findall(line)):
                    if name and not _TEST_HELPERS.match(name) and name != code_name(frame):
                        where = f"{match.path}:{frame.lineno}"
                        clues += self.definitions(name, strength, f"{name}() is what the test at {where} called")
        return clues

    def definitions(self, name: str, strength: float, why: str) -> list[Clue]:
        """Where `name` is defined, when that is in a few files only."""
        if len(name) < 3:
            return []
        defining = re.compile(definition_regex(name))
        hits = _first_per_file((p, n) for p, n, text in self._word(name) if defining.search(text))
        if not hits or len(hits) > 3:
            return []
        return [Clue(path, line, strength, [f"{why} ({path}:{line})"]) for path, line in hits]

    def _mentions(self, term: str, strength: float, why: str) -> list[Clue]:
        hits = _first_per_file((p, n) for p, n, _ in self._word(term))
        if not hits or len(hits) > _MAX_FILES_PER_TERM:
            return []
        share = strength / math.sqrt(len(hits))
        return [Clue(path, line, share, [f"{why} ({path}:{line})"]) for path, line in hits]

    def _word(self, term: str) -> list[tuple[str, int, str]]:
        """Application lines holding `term` as a whole word: one search of the checkout per term."""
        if term not in self._hits:
            result = self._tools.grep_files(rf"(?<![\w$]){re.escape(term)}(?![\w$])")
            found = result.data if result.status == "ok" and result.data else ()
            self._hits[term] = [(m.path, m.line, m.text) for m in found
                                if not (is_test_path(m.path) or is_generated_path(m.path))]
        return self._hits[term]

    def _files_named(self, term: str, strength: float, why: str) -> list[Clue]:
        """Repository files a path names: an absolute path from another machine by its longest matching tail."""
        parts = tuple(p for p in term.replace("\\", "/").split("/") if p not in ("", ".", ".."))
        for start in range(len(parts)):
            found = [p for p in self._index.paths_ending(parts[start:]) if not is_test_path(p)]
            if found and (len(parts) - start > 1 or len(found) == 1):
                return [Clue(p, None, strength, [why]) for p in found[:3]]
        return []

    def _module(self, dotted: str, strength: float, why: str) -> list[Clue]:
        """The file of a module or class a dotted name starts with (`app.rates` → app/rates.py)."""
        parts = tuple(p for p in dotted.split(".") if p)
        found: list[str] = []
        for ext in ("py", "js", "ts", "mjs", "java", "kt", "go"):
            found += self._index.paths_ending((*parts[:-1], f"{parts[-1]}.{ext}"))
        found += self._index.paths_ending((*parts, "__init__.py"))
        return [Clue(p, None, strength, [why]) for p in dict.fromkeys(found) if not is_test_path(p)][:3]


def _first_per_file(hits: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
    first: dict[str, int] = {}
    for path, line in hits:
        first.setdefault(path, line)
    return list(first.items())


def combine(clues: Iterable[Clue]) -> list[Clue]:
    """One clue per file: independent signals add up (1 - Π(1 - s)), the strongest signal's line is cited."""
    by_path: dict[str, list[Clue]] = {}
    for clue in clues:
        by_path.setdefault(clue.path, []).append(clue)
    out: list[Clue] = []
    for path, found in by_path.items():
        found.sort(key=lambda c: -c.score)
        miss = math.prod(1 - min(c.score, 0.95) for c in found)
        line = next((c.line for c in found if c.line), None)
        reasons = list(dict.fromkeys(r for c in found for r in c.reasons))
        out.append(Clue(path, line, round(min(0.85, 1 - miss), 3), reasons))
    return sorted(out, key=lambda c: -c.score)
