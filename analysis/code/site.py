"""Stack frames placed in the code they ran: the method each one names, and the line it means.

A frame's line is checked against the file: it must lie inside the named method and hold the call to the
next frame (for the innermost frame: a raise, or the construct its runtime fault needs). A trace from
another build points a few lines off, or outside the method; then the method is found by name and arity
(overloads by the caller's argument count), the line is searched for inside it, and the site is marked
unverified rather than citing a line the frame never ran.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from analysis.code.expression import IDENT, calls_in
from analysis.code.filemap import FileMatch
from analysis.code.shape import INLINE_CHECK, RAISE, THROWABLE
from analysis.code.source import Method, Source, language_of
from analysis.code.tools import FileTools
from analysis.event import ExceptionInfo, Frame

_MAX_SITES = 40
_MAX_FILE_LINES = 60_000
RUNTIME_FAULTS = re.compile(
    r"NullPointer|IndexOutOfBounds|ClassCast|Arithmetic|ArrayStore|NegativeArraySize|StackOverflow|OutOfMemory"
    r"|ConcurrentModification|NoSuchElement|NumberFormat|^(?:builtins\.)?(?:KeyError|IndexError|AttributeError"
    r"|TypeError|ZeroDivisionError|ValueError|NameError|UnboundLocalError|RecursionError|RangeError"
    r"|ReferenceError)$|runtime error|^panic$"
)
# What a line must hold to fail with a runtime fault of each kind.
_FAULT_SHAPES = {
    "ClassCast": re.compile(r"\(\s*[A-Z][\w$.<>\[\], ?]*\)\s*[\w$(]"),
    "ArrayIndexOutOfBounds": re.compile(r"[\w$)\]]\s*\["),
    "ArrayStore": re.compile(r"\]\s*=(?!=)"),
    "StringIndexOutOfBounds": re.compile(r"\b(?:substring|charAt|subSequence|codePointAt)\s*\(|\["),
    "Arithmetic": re.compile(r"[/%]"),
    "ZeroDivision": re.compile(r"[/%]"),
    "NullPointer": re.compile(r"[\w$)\]]\s*(?:\.|\[)|\bthrow\b|\bsynchronized\b"),
    "NegativeArraySize": re.compile(r"\bnew\s+[\w$.]+\s*\["),
}
# Synthetic frames that only forward their caller's call: bridge methods point at the class declaration.
_DECLARATION_LINE = re.compile(
    r"^\s*(?:@[\w.]+|(?:(?:public|protected|private|final|abstract|static)\s+)*(?:class|interface|enum|record|object)\b)"
)
_MODULE_SCOPE = ("<module>", "Object.<anonymous>", "<anonymous>", "<top-level>")


@dataclass
class Site:
    """A mapped frame as read in the code: the method found there and the line the analysis reads."""

    index: int
    """The frame's position in its exception's frames (0 = innermost)."""
    frame: Frame
    path: str
    source: Source | None
    method: Method | None
    line: int | None
    verified: bool
    note: str = ""

    @property
    def name(self) -> str:
        """The frame's method as written in the code (`BigFraction` for a Java constructor)."""
        return self.method.name if self.method else code_name(self.frame)

    @property
    def top_level(self) -> bool:
        """Whether the frame runs a module's top-level code rather than a function."""
        return self.method is not None and self.method.name == "<module>"

    @property
    def who(self) -> str:
        """The frame as a sentence names it: `walk()`, or the module's top-level code."""
        return "the module's top-level code" if self.top_level else f"{self.name}()"

    @property
    def where(self) -> str:
        """path:line as cited."""
        return f"{self.path}:{self.line}" if self.line else self.path

    @property
    def readable(self) -> bool:
        """Whether the site's file, method and line are all known."""
        return self.source is not None and self.method is not None and self.line is not None

    def statement(self, masked: bool = True) -> str:
        """The statement at the site's line (masked: strings and comments blanked)."""
        return self.source.statement_text(self.line, masked) if self.source and self.line else ""


def fault_kind(exc_type: str, value: str) -> str:
    """The exception type, with a Go runtime panic named after the fault it reports (a nil dereference
    reads as a NullPointerException), so the rules for runtime faults apply alike."""
    if exc_type not in ("runtime.Error", "runtime error", "panic"):
        return exc_type
    for needle, kind in (("nil pointer", "NullPointerException"), ("index out of range", "IndexOutOfBoundsException"),
                         ("slice bounds", "IndexOutOfBoundsException"), ("divide by zero", "ArithmeticException")):
        if needle in value:
            return kind
    return "panic"


def code_name(frame: Frame) -> str:
    """The method name as declared in source for a frame; '' for anonymous and synthetic frames."""
    function = frame.function.strip()
    if function.startswith("new "):
        return "constructor"
    function = function.removeprefix("async ").split(" [as ", 1)[0]
    if function == "<init>":
        simple = frame.module.rsplit(".", 1)[-1].rsplit("$", 1)[-1]
        return "" if simple.isdigit() else simple
    if function.startswith("lambda$"):  # a lambda's body sits in the method it is named after
        parts = function.split("$")
        return parts[1] if len(parts) > 2 else ""
    if function.startswith(("<", "access$", "[")) or function in ("", "?"):
        return ""
    parts = [p for p in re.split(r"[.:]", function.rstrip(")")) if not re.fullmatch(r"func\d+|\d+", p)]
    name = parts[-1].strip("()*") if parts else ""
    return name if re.fullmatch(IDENT, name) else ""


def real_frame(frame: Frame) -> bool:
    """False for a message line a trace parser took for a frame (Jackson's ` at [Source: ...]`)."""
    return not frame.function.startswith("[") and ": " not in frame.function


def is_throwable_class(site: Site) -> bool:
    """Whether the site runs in an exception class: its constructors and factories only build the error."""
    owner = site.frame.module.rsplit(".", 1)[-1].split("$", 1)[0] or site.path.rsplit("/", 1)[-1].split(".")[0]
    if THROWABLE.search(owner):
        return True
    if site.source is None or not owner:
        return False
    declared = re.compile(r"\bclass\s+" + re.escape(owner) + r"\b[^{]*?(?:extends|:|\()\s*[\w.]*(?:Exception|Error)\b")
    return any(declared.search(line) for line in site.source.code[:400])


def place(index: int, frame: Frame, path: str, source: Source | None, callee: Frame | None, exc_type: str,
          arity: int | None) -> Site:
    """One mapped frame placed in its file: its method, and its line checked against what the trace says."""
    lineno = frame.lineno
    if source is None:
        return Site(index, frame, path, None, None, lineno, False, f"{path} could not be read")
    if frame.function in _MODULE_SCOPE:
        module = Method("<module>", 1, len(source.lines), ())
        return Site(index, frame, path, source, module, lineno, lineno is not None)
    name = code_name(frame)
    candidates = source.named(name) if name else []
    if not candidates:
        method = source.enclosing(lineno) if lineno else None
        if name and source.lang != "python":
            missing = f"no method {name}() in {path} at this commit"
            return Site(index, frame, path, source, method, lineno, False, missing)
        return Site(index, frame, path, source, method, lineno, method is not None)
    holding = [m for m in candidates if lineno is not None and m.contains(lineno)]
    if holding:
        method = max(holding, key=lambda m: m.start)
    else:
        by_arity = [m for m in candidates if arity is not None and len(m.params) == arity] or candidates
        method = min(by_arity, key=lambda m: abs(m.start - (lineno or m.start)))
    throwable = THROWABLE.search(frame.module.split("$")[0]) is not None
    expect = _expectation(source, candidates, callee, exc_type, throwable)
    if lineno is not None and method.contains(lineno) and expect(lineno):
        return Site(index, frame, path, source, method, lineno, True)
    found = [n for n in range(method.start, method.end + 1) if expect(n)]
    for other in [] if found else sorted(candidates, key=lambda m: abs(m.start - (lineno or m.start))):
        hits = [n for n in range(other.start, other.end + 1) if expect(n)]
        if hits:  # an overload holds what the trace names
            found, method = hits, other
            break
    where = f"{name}() at {path}:{method.start}"
    if not found:
        line = lineno if lineno is not None and method.contains(lineno) else method.start
        return Site(index, frame, path, source, method, line, False,
                    f"line {lineno} could not be matched inside {where} (line unverified)")
    line = max(source.statement(min(found, key=lambda n: (abs(n - (lineno or n)), n)))[0], method.start)
    what = "does not hold the call the trace names" if callee else "does not hold a raise"
    why = what if lineno is not None and method.contains(lineno) else f"is not inside {name}()"
    return Site(index, frame, path, source, method, line, False,
                f"line {lineno} {why}; {where}, read line {line} instead (line unverified)")


def _explicit_raise(exc_type: str) -> re.Pattern[str]:
    """A statement raising the trace's exception type by name (`throw new X(`, `raise X(`)."""
    simple = re.escape(exc_type.rsplit(".", 1)[-1].split("$")[0] or "?")
    return re.compile(rf"(?<![\w$.])(?:throw|raise)\s+(?:new\s+)?(?:[\w$]+\.)*{simple}\b")


# The JVM's errors of a class whose static initialiser failed, raised where the class was first used.
_CLASS_INIT_ERRORS = ("ExceptionInInitializerError", "NoClassDefFoundError")


def _expectation(source: Source, methods: Sequence[Method], callee: Frame | None, exc_type: str,
                 throwable: bool) -> Callable[[int], bool]:
    """What a frame's line must hold: the call to the next frame; for the innermost frame the raise of the
    trace's exception type when the method has one, else what the runtime fault needs, else any raise."""
    if callee is not None:
        target = code_name(callee)
        if not target or callee.function.startswith(("invoke", "lambda$", "access$")):
            return lambda n: bool(source.masked(n).strip(" {}"))
        if callee.function == "<init>" or target == "constructor":
            owner = re.escape(callee.module.rsplit(".", 1)[-1].split("$")[0])
            pattern = re.compile(rf"\bnew\s+[\w.]*{owner}\b|\b(?:this|super)\s*\(|\b{re.escape(target)}\b")
        else:
            pattern = re.compile(r"(?<![\w$])" + re.escape(target) + r"\b")
        return lambda n: bool(pattern.search(source.statement_text(n)))
    if throwable or exc_type.endswith(_CLASS_INIT_ERRORS):  # a class's initialiser ran at its first use: any line
        return lambda n: bool(source.masked(n).strip(" {}"))
    explicit = _explicit_raise(exc_type)
    if any(explicit.search(source.statement_text(n)) for m in methods for n in range(m.start, m.end + 1)):
        return lambda n: bool(explicit.search(source.statement_text(n)))
    if RUNTIME_FAULTS.search(exc_type):
        shape = next((p for key, p in _FAULT_SHAPES.items() if key in exc_type), None)
        if shape is not None:
            return lambda n: bool(shape.search(source.masked(n)))
        return lambda n: bool(source.masked(n).strip(" {}"))
    return lambda n: bool(RAISE.search(source.statement_text(n)) or INLINE_CHECK.search(source.statement_text(n)))


# -- reading the trace's files ------------------------------------------------------------------------------


class SourceReader:
    """Whole files through the file tools (paged past their size cap), cached for one analysis.

    The localiser's reads do not count as the model's: `files_read` is left as it was.
    """

    def __init__(self, tools: FileTools) -> None:
        self._tools = tools
        self._cache: dict[str, Source | None] = {}

    def source(self, path: str) -> Source | None:
        """The file as source code, or None when it cannot be read or is not a language read here."""
        if path not in self._cache:
            lang = language_of(path)
            self._cache[path] = self._read(path, lang) if lang else None
        return self._cache[path]

    def _read(self, path: str, lang: str) -> Source | None:
        before = set(self._tools.files_read)
        lines: list[str] = []
        start = 1
        try:
            while len(lines) < _MAX_FILE_LINES:
                result = self._tools.read_file(path, start)
                if result.status != "ok" or result.data is None:
                    return None
                lines.extend(result.data.lines)
                if result.data.end_line >= result.data.total_lines:
                    return Source(path, tuple(lines), lang)
                start = result.data.end_line + 1
            return None
        finally:
            self._tools.files_read.intersection_update(before)


def transparent(frame: Frame, source: Source | None) -> bool:
    """A synthetic frame (bridge method, accessor) that only forwards its caller's call."""
    if frame.function.startswith("access$"):
        return True
    return bool(source and frame.lineno and _DECLARATION_LINE.match(source.masked(frame.lineno)))


def read_sites(exc: ExceptionInfo, mapped: Sequence[tuple[int, Frame, FileMatch]], reader: SourceReader) -> list[Site]:
    """The mapped frames placed in their code, innermost first, synthetic forwarders left out."""
    chosen = [(i, f, m) for i, f, m in mapped[:_MAX_SITES] if not transparent(f, reader.source(m.path))]
    sites: list[Site] = []
    arity: int | None = None
    kind = fault_kind(exc.type, exc.value)
    for i, frame, match in reversed(chosen):  # outermost first: a caller's call gives its callee's arity
        callee = exc.frames[i - 1] if i > 0 else None
        site = place(i, frame, match.path, reader.source(match.path), callee, kind, arity)
        sites.append(site)
        target = code_name(callee) if callee else ""
        calls = calls_in(site.statement(), target) if target and site.readable else []
        arity = len(calls[0][1]) if calls else None
    return sites[::-1]


def adjacency(exc: ExceptionInfo, reader: SourceReader, paths: dict[int, str]) -> Callable[[Site, Site], bool]:
    """A test of whether `caller` calls `callee` directly: only synthetic forwarders between them."""

    def adjacent(caller: Site, callee: Site) -> bool:
        between = range(callee.index + 1, caller.index)
        return caller.index > callee.index and all(
            k in paths and transparent(exc.frames[k], reader.source(paths[k])) for k in between
        )

    return adjacent
