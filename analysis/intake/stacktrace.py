"""Raw text stack traces (Java, Python, Node.js/V8, Go) parsed into exception chains.

Each runtime's parser (`trace_java`, `trace_python`, `trace_node`, `trace_go`) is a single pass over
the lines with plain string operations, never raises, and caps the work it keeps. This module detects
the runtime and memoises: the events of a burst print the same frames under different messages (ids,
goroutine numbers; Go also with fresh argument words), so the frames are parsed once per distinct frame
text and only the short header lines are read per event, without scanning the frames again.
"""

from __future__ import annotations

import re
import sys

from analysis.cache import OBJECT_BYTES, BoundedCache
from analysis.intake.trace_dialect import Chain, Stacks, TraceDialect, split_type
from analysis.intake.trace_go import DIALECT as GO
from analysis.intake.trace_java import DIALECT as JAVA
from analysis.intake.trace_node import DIALECT as NODE
from analysis.intake.trace_python import DIALECT as PYTHON
from analysis.intake.trace_python import TRACEBACK

DEFAULT_MAX_FRAMES = 2000
_DIALECTS: dict[str, TraceDialect] = {dialect.language: dialect for dialect in (JAVA, PYTHON, NODE, GO)}

# ---------------------------------------------------------------- language detection
# Detection is a function of a few facts, each "this marker occurs somewhere in the text". A fact of
# the whole text is the OR of the facts of its parts, so a cached frame region's facts combine with
# the facts of a new event's headers without scanning the region again.
_PY = 1
_GOROUTINE = 2
_GO_MARK = 4
_JAVA_AT = 8
_NODE_AT = 16
_ANY_AT = 32
_GO_STARTS = ("panic: ", "fatal error: ")

# `at` lines are found by searching the whole text (with a newline in front, so the first line counts
# too), not line by line: a loop over the lines cost ~50 µs of a 3 kB V8 trace, these searches ~2 µs.
_AT_LINE = re.compile(r"\n[ \t]*at ")
# `(Foo.java:12)`, `(Foo.kt)`, `(Unknown Source)`, `(Native Method)`, maybe followed by logback's `~[x.jar:1]`.
_JAVA_LOCATION = re.compile(
    r"\((?:[\w$-]+\.(?:java|kt|kts|scala|groovy|clj)(?::\d+)?|Unknown Source(?::\d+)?|Native Method)\)"
)
# `(/app/x.js:12:5)` or bare `/app/x.js:12:5` ending the line, maybe before ` {` and blanks.
_NODE_AT_LINE = re.compile(r"\n[ \t]*at [^\n]*:\d+:\d+\)?(?: \{)?[^\S\n]*(?=\n|\Z)")


def _facts(text: str) -> int:
    if TRACEBACK in text:
        return _PY  # decides for Python whatever else this text or any other part holds (`_decide`)
    facts = 0
    if "goroutine " in text:
        facts |= _GOROUTINE
    if "panic: " in text or "fatal error: " in text or " [running]:" in text:
        facts |= _GO_MARK
    if "at " in text:
        lines = "\n" + text
        if _AT_LINE.search(lines):
            facts |= _ANY_AT
            if _java_at_line(lines):
                return facts | _JAVA_AT  # decides for the JVM whatever else the lines hold (`_decide`)
            if _NODE_AT_LINE.search(lines):
                facts |= _NODE_AT
    return facts


def _java_at_line(lines: str) -> bool:
    """Whether an `at` line of `lines` (which starts with a newline) holds a JVM location."""
    found = _JAVA_LOCATION.search(lines)
    while found is not None:
        start = lines.rfind("\n", 0, found.start()) + 1
        if lines[start : found.start()].lstrip(" \t").startswith("at "):
            return True
        end = lines.find("\n", found.end())
        found = _JAVA_LOCATION.search(lines, end) if end >= 0 else None
    return False


def _decide(facts: int, starts_like_go: bool) -> str:
    if facts & _PY:
        return "python"
    if facts & _GOROUTINE and facts & _GO_MARK:
        return "go"
    if facts & _JAVA_AT:
        return "java"
    if facts & _NODE_AT:
        return "node"
    if facts & _ANY_AT:
        return "java"  # `at` lines without a location the JVM or V8 would print: read them as JVM frames
    return "go" if starts_like_go else ""


def detect_language(text: str) -> str:
    """Guess the runtime that printed `text`: python, go, node, java, or '' when it is no known trace.

    Every `at` line counts, not just the first: V8 traces often open with frames that have no file
    (`at JSON.parse (<anonymous>)`), and a single `file:line:column` location anywhere makes it Node,
    unless a JVM location (`(Foo.java:12)`, `(Unknown Source)`, `(Native Method)`) says otherwise.
    """
    return _decide(_facts(text), text.startswith(_GO_STARTS))


_EXCEPTION_SUFFIXES = ("Exception", "Error", "Throwable", "Warning")
_PYTHON_EXCEPTIONS = frozenset({"KeyboardInterrupt", "SystemExit", "StopIteration", "StopAsyncIteration",
                                "GeneratorExit", "ExceptionGroup", "BaseExceptionGroup"})


def exception_line(line: str) -> tuple[str, str] | None:
    """(type, message) of a line that only names an exception, as a trace without frames prints it
    (`java.lang.NullPointerException` under OmitStackTraceInFastThrow, `ValueError: x`, V8's `TypeError: x`);
    None unless the name looks like an exception class, so that prose (`n/a`, `see logs: x`) names no type."""
    parsed = split_type(line)
    if parsed is None:
        return None
    name = parsed[0].rpartition(".")[2]
    return (parsed[0], parsed[1].strip()) if name.endswith(_EXCEPTION_SUFFIXES) or name in _PYTHON_EXCEPTIONS \
        else None


# ---------------------------------------------------------------- parsing and its memo


def _parse(text: str, max_frames: int) -> Chain:
    """The full parse: detection, then the runtime's parser; () for text that is no trace."""
    return _parse_as(_dialect_of(text), text, max_frames)


def _dialect_of(text: str) -> TraceDialect | None:
    try:
        return _DIALECTS.get(detect_language(text))
    except Exception:  # a detection bug on hostile text must never take the consumer down
        return None


def _parse_as(dialect: TraceDialect | None, text: str, max_frames: int) -> Chain:
    try:
        return dialect.parse(text, max(1, max_frames)) if dialect is not None else ()
    except Exception:  # a parser bug on hostile text must never take the consumer down
        return ()


class _Skeleton:
    """The cached frame regions of one trace text and their parsed frames."""

    __slots__ = ("dialect", "facts", "last_chain", "last_headers", "last_text", "nbytes", "regions", "stacks",
                 "text_room")

    def __init__(self, dialect: TraceDialect, regions: tuple[str, ...], stacks: Stacks, facts: int,
                 nbytes: int) -> None:
        self.dialect = dialect
        self.regions = regions
        self.stacks = stacks
        self.facts = facts  # -1 until first matched: most frame regions (a new failure's) never are
        self.nbytes = nbytes  # what the cache charges for it: see _trace_bytes
        # A repeat of the last headers hands back the very chain object (the fingerprint caches on it).
        self.last_headers: tuple[str, ...] = ()
        self.last_chain: Chain = ()
        # The last text that gave it (a trace without ids repeats verbatim): a memcmp instead of a match.
        # Kept up to `text_room` bytes, which `nbytes` includes.
        self.last_text = ""
        self.text_room = 0


_MAX_CACHED_TEXT = 64 * 1024  # longer traces are rare and would pin too much memory in the cache
_KEY_SIZE = 96
_KEY_SEARCH = 2048
_INDENTED = re.compile(r"\n[ \t]")
_PY_FRAME_LINE = '\n  File "'
_BUCKET_SIZE = 8
_SKELETONS: BoundedCache[tuple[str, int], list[_Skeleton]] = BoundedCache("stacktrace.skeletons", 1024, 64 << 20)
# Texts no skeleton covers, with their chains.
_TEXTS: BoundedCache[tuple[int, str, int], list[tuple[str, Chain, int]]] = BoundedCache("stacktrace.texts", 1024,
                                                                                        32 << 20)


def _trace_bytes(text: str, stacks: Stacks) -> int:
    """What an entry made from `text` keeps alive: the text (regions, or the text itself), the headers and
    frame strings cut from it (at most as much again), and an object per frame."""
    return 2 * sys.getsizeof(text) + OBJECT_BYTES * (1 + sum(map(len, stacks)))


def parse_trace(text: str, max_frames: int = DEFAULT_MAX_FRAMES) -> Chain:
    """Parse a raw text trace into a chain, outermost first and root cause last; () when unparseable.

    Frames are innermost first and capped at `max_frames` per exception (the innermost are kept).
    A repeated trace returns the very same tuple, and a repeated frame text the very same frame tuples,
    which downstream caches key on.
    """
    if len(text) > _MAX_CACHED_TEXT:
        return _parse(text, max_frames)
    key = _skeleton_key(text, max_frames)
    if key is not None:
        chain = _from_skeleton(text, key)
        if chain is not None:
            return chain
    text_key = (len(text), text[-_KEY_SIZE:], max_frames)
    bucket = _TEXTS.get(text_key)
    if bucket is not None:
        for cached_text, cached, _ in bucket:
            if cached_text == text:
                return cached
    dialect = _dialect_of(text)  # detected once, for the parse and for the skeleton
    chain = _parse_as(dialect, text, max_frames)
    if key is None or not _learn(text, key, chain, dialect):
        _remember_text(text_key, text, chain)
    return chain


def _skeleton_key(text: str, max_frames: int) -> tuple[str, int] | None:
    """A frame line that tells traces apart keys the frame regions' cache: the innermost one.

    JVM, V8 and Go print the innermost frame first: the first indented line (with the start of the next,
    but for Go). Python prints it last, and its first frames are the framework's, shared by every failure:
    there the last `File` line counts.
    """
    # The first indented line usually follows one of the first few newlines: find those (a memchr)
    # and let the regex search only when they are not it. Same result as searching from the start.
    start = text.find("\n", 0, _KEY_SEARCH - 1)
    for _ in range(4):
        if start < 0:
            return None
        if text[start + 1 : start + 2] in (" ", "\t"):
            break
        start = text.find("\n", start + 1, _KEY_SEARCH - 1)
    else:
        first = _INDENTED.search(text, start, _KEY_SEARCH) if start >= 0 else None
        if first is None:
            return None
        start = first.start()
    if text.startswith(_PY_FRAME_LINE, start):
        start = text.rfind(_PY_FRAME_LINE)
    key = text[start : start + _KEY_SIZE]
    end = key.find("\n", 1)
    if end > 0 and ".go:" in key:  # Go: the function line after the location ends in argument words, fresh
        key = key[:end]  # in every event (`trace_go`), so the key stops at the end of the location line
    return key, max_frames


def _from_skeleton(text: str, key: tuple[str, int]) -> Chain | None:
    bucket = _SKELETONS.get(key)
    if bucket is None:
        return None
    for index, skeleton in enumerate(bucket):
        if text == skeleton.last_text:  # what the match below would give again, without redoing it
            if index:
                bucket.insert(0, bucket.pop(index))
            return skeleton.last_chain
        dialect = skeleton.dialect
        matched = dialect.match(text, skeleton.regions)
        if matched is None:
            continue
        if index:  # bursts that share a key interleave: the last one matched is the likeliest next
            bucket.insert(0, bucket.pop(index))
        headers, outside = matched
        facts = skeleton.facts
        if facts < 0:
            facts = skeleton.facts = _facts_of(skeleton.regions)
        for part in outside:
            facts |= _facts(part)
        if _decide(facts, text.startswith(_GO_STARTS)) != dialect.language:
            return None
        memo = tuple(headers)
        if memo == skeleton.last_headers:
            _remember(skeleton, text)
            return skeleton.last_chain
        try:
            chain = dialect.rebuild(headers, skeleton.stacks)
        except Exception:  # hostile header text: the full parser decides
            return None
        skeleton.last_headers, skeleton.last_chain = memo, chain
        _remember(skeleton, text)
        return chain
    return None


def _remember(skeleton: _Skeleton, text: str) -> None:
    skeleton.last_text = text if sys.getsizeof(text) <= skeleton.text_room else ""


def _learn(text: str, key: tuple[str, int], chain: Chain, dialect: TraceDialect | None) -> bool:
    """Cache the frame regions of `text` (parsed by `dialect`) when rebuilding from them reproduces its
    full parse exactly."""
    if dialect is None or not chain:
        return False
    try:
        pieces = dialect.split(text)
        if pieces is None:
            return False
        headers, regions = pieces
        stacks = dialect.stacks(chain)
        if len(stacks) != len(regions) or not all(stacks) or dialect.rebuild(headers, stacks) != chain:
            return False
        matched = dialect.match(text, tuple(regions))  # its header checks must pass for it to be of use
        if matched is None or matched[0] != headers:
            return False
    except Exception:  # hostile text: simply not cached
        return False
    room = 2 * sys.getsizeof(text)  # for a last text up to twice this one (headers grow with their ids)
    skeleton = _Skeleton(dialect, tuple(regions), stacks, -1, _trace_bytes(text, stacks) + room)
    skeleton.last_headers, skeleton.last_chain, skeleton.last_text, skeleton.text_room = (tuple(headers), chain,
                                                                                         text, room)
    bucket = [skeleton, *(_SKELETONS.get(key) or ())][:_BUCKET_SIZE]  # the newest deploy's frames first
    _SKELETONS.put(key, bucket, sum(s.nbytes for s in bucket))
    return True


def _facts_of(regions: tuple[str, ...]) -> int:
    facts = 0
    for region in regions:
        facts |= _facts(region)
    return facts


def _remember_text(key: tuple[int, str, int], text: str, chain: Chain) -> None:
    entry = (text, chain, _trace_bytes(text, tuple(exception.frames for exception in chain)))
    bucket = [*(_TEXTS.get(key) or ()), entry][-_BUCKET_SIZE:]
    _TEXTS.put(key, bucket, sum(nbytes for _, _, nbytes in bucket))
