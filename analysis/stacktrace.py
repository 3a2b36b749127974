"""Raw text stack traces (Java, Python, Node.js/V8, Go) parsed into exception chains.

Every parser is a single pass over the lines with plain string operations (no backtracking regex over
the whole text), never raises, and caps the work it keeps: frames per exception and exceptions per chain.
Bursts repeat the same trace text, so whole traces and single frame lines are memoised.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from analysis.event import ExceptionInfo, Frame

DEFAULT_MAX_FRAMES = 2000
_MAX_CHAIN = 64
_MAX_CACHED_TEXT = 64 * 1024  # longer traces are rare and would pin too much memory in the cache
_MAX_HEADER_LINES = 20

_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")
_NODE_TYPE = re.compile(r"[A-Za-z_$][\w$.]*(?: \[[\w-]+\])?")
_PY_FRAME = re.compile(r'File "([^"]*)", line (\d+)(?:, in (.+))?')
_HIDDEN_CLASS = re.compile(r"/0x[0-9a-fA-F]+")
_NODE_FRAME_LINE = re.compile(r"^[ \t]+at .+$", re.MULTILINE)
_NODE_LOCATION = re.compile(r":\d+:\d+\)?\s*$")
_JAVA_CAUSE = re.compile(r"\nCaused by: ")

_PY_CHAIN_MARKERS = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)


def parse_trace(text: str, max_frames: int = DEFAULT_MAX_FRAMES) -> tuple[ExceptionInfo, ...]:
    """Parse a raw text trace into a chain, outermost first and root cause last; () when unparseable.

    Frames are innermost first and capped at `max_frames` per exception (the innermost are kept).
    A repeated trace returns the very same tuple, which downstream caches key on.
    """
    if len(text) > _MAX_CACHED_TEXT:
        return _parse(text, max_frames)
    cached: tuple[ExceptionInfo, ...] | None = _lookup(_TRACES, text, max_frames)
    if cached is None:
        cached = _parse_by_skeleton(text, max_frames)
        _store(_TRACES, text, max_frames, cached)
    return cached


_Cache = dict[tuple[int, str, int], list[tuple[str, Any]]]
_TRACES: _Cache = {}
_SKELETONS: _Cache = {}
_CACHE_SIZE = 1024
_BUCKET_SIZE = 8
_KEY_TAIL = 96


def _lookup(cache: _Cache, text: str, max_frames: int) -> Any:
    # Hashing a whole fresh trace string costs more than the rest of the lookup: the key takes its length
    # and tail, and an exact comparison (a memcmp) picks the entry.
    bucket = cache.get((len(text), text[-_KEY_TAIL:], max_frames))
    if bucket is not None:
        for cached_text, value in bucket:
            if cached_text == text:
                return value
    return None


def _store(cache: _Cache, text: str, max_frames: int, value: Any) -> None:
    key = (len(text), text[-_KEY_TAIL:], max_frames)
    bucket = cache.get(key)
    if bucket is None:
        if len(cache) >= _CACHE_SIZE:
            cache.pop(next(iter(cache)), None)
        cache[key] = [(text, value)]
    else:
        bucket.append((text, value))
        if len(bucket) > _BUCKET_SIZE:
            del bucket[0]


def _parse_by_skeleton(text: str, max_frames: int) -> tuple[ExceptionInfo, ...]:
    """Events of a burst print the same frames under different messages (ids, goroutine numbers).

    The frame lines (the skeleton) are cut out with a few `find`s and cached; only the message lines are
    parsed per event. A skeleton is cached only once rebuilding from it reproduced the full parse exactly.
    """
    try:
        language = detect_language(text)
        splitter = _SPLITTERS.get(language)
        pieces = splitter(text) if splitter is not None else None
    except Exception:  # hostile text: the full parser decides
        pieces = None
    if pieces is None:
        return _parse(text, max_frames)
    headers, skeleton = pieces
    rebuild = _REBUILDERS[language]
    stacks = _lookup(_SKELETONS, skeleton, max_frames)
    if stacks is not None and len(stacks) == len(headers):
        try:
            return rebuild(headers, stacks)
        except Exception:  # hostile header text: the full parser decides
            return _parse(text, max_frames)
    chain = _parse(text, max_frames)
    stacks = tuple(exception.frames for exception in (reversed(chain) if language == "python" else chain))
    if language == "go":
        stacks = stacks[:1]
    if chain and len(stacks) == len(headers) and rebuild(headers, stacks) == chain:
        _store(_SKELETONS, skeleton, max_frames, stacks)
    return chain


_JAVA_FRAME_START = re.compile(r"\n[ \t]*(?:at |\.\.\. \d)")
_NODE_FRAME_START = re.compile(r"\n[ \t]+at ")
_NODE_CAUSE = re.compile(r"\n[ \t]*\[cause\]: ")
_PY_MESSAGE_START = re.compile(r"\n(?=[^ \t\n])")
_PY_TRACEBACK = "Traceback (most recent call last):"


def _split_blocks(
    text: str, frame_start: re.Pattern[str], next_header: re.Pattern[str]
) -> tuple[list[str], str] | None:
    headers: list[str] = []
    parts: list[str] = []
    start = 0
    while True:
        frames = frame_start.search(text, start)
        if frames is None:
            return None  # a block without frames: leave it to the full parser
        header = next_header.search(text, frames.start())
        end = header.start() if header is not None else len(text)
        headers.append(text[start : frames.start()])
        parts.append(text[frames.start() : end])
        if header is None:
            return headers, "\0".join(parts)
        start = header.start() + 1


def _split_java(text: str) -> tuple[list[str], str] | None:
    return _split_blocks(text, _JAVA_FRAME_START, _JAVA_CAUSE)


def _split_node(text: str) -> tuple[list[str], str] | None:
    return _split_blocks(text, _NODE_FRAME_START, _NODE_CAUSE)


def _split_python(text: str) -> tuple[list[str], str] | None:
    if "Exception Group" in text:
        return None
    headers: list[str] = []
    parts: list[str] = []
    position = text.find(_PY_TRACEBACK)
    while position >= 0:
        message = _PY_MESSAGE_START.search(text, position)
        if message is None:
            return None
        following = text.find(_PY_TRACEBACK, message.end())
        parts.append(text[position : message.start()])
        headers.append(text[message.start() : following if following >= 0 else len(text)])
        position = following
    return headers, "\0".join(parts)


def _split_go(text: str) -> tuple[list[str], str] | None:
    running = text.find(" [running]:\n")
    line_start = text.rfind("\n", 0, running) + 1
    if running < 0 or not text.startswith("goroutine ", line_start):
        return None
    body = running + len(" [running]:\n")
    end = text.find("\n\n", body)
    return [text[:line_start]], text[body : end if end >= 0 else len(text)]


def _header_lines(header: str, prefix: str = "") -> list[str]:
    lines = [line.strip() for line in header.splitlines()]
    lines = [line for line in lines if line]
    if prefix and lines and lines[0].startswith(prefix):
        lines[0] = lines[0][len(prefix) :]
    return lines


def _rebuild_java(headers: list[str], stacks: tuple[tuple[Frame, ...], ...]) -> tuple[ExceptionInfo, ...]:
    chain = []
    for index, (header, frames) in enumerate(zip(headers, stacks, strict=True)):
        lines = _header_lines(header, "Caused by: " if index else "")[:_MAX_HEADER_LINES]
        info = _header_exception(lines, frames)
        chain.append(info or ExceptionInfo(type="", value="\n".join(lines), frames=frames))
    return tuple(chain)


def _rebuild_node(headers: list[str], stacks: tuple[tuple[Frame, ...], ...]) -> tuple[ExceptionInfo, ...]:
    chain = []
    for index, (header, frames) in enumerate(zip(headers, stacks, strict=True)):
        lines = [line.rstrip(" {") for line in _header_lines(header, "[cause]: " if index else "")]
        info = _node_header(lines)
        chain.append(ExceptionInfo(type=info.type, value=info.value, frames=frames))
    return tuple(chain)


def _rebuild_python(headers: list[str], stacks: tuple[tuple[Frame, ...], ...]) -> tuple[ExceptionInfo, ...]:
    printed = []
    for header, frames in zip(headers, stacks, strict=True):
        message = []
        for line in header.splitlines():
            if line.strip() in _PY_CHAIN_MARKERS:
                break
            if line.strip() and line[:1] not in (" ", "\t"):
                message.append(line.strip())
        parsed = _split_type(message[0]) if message else None
        parsed = parsed or ("", message[0] if message else "")
        value = "\n".join([parsed[1], *message[1:_MAX_HEADER_LINES]]).strip()
        printed.append(ExceptionInfo(type=parsed[0], value=value, frames=frames))
    return tuple(reversed(printed))


def _rebuild_go(headers: list[str], stacks: tuple[tuple[Frame, ...], ...]) -> tuple[ExceptionInfo, ...]:
    panics = _go_panics(headers[0].splitlines()) or [("panic", "")]
    return tuple(ExceptionInfo(type=kind, value=value, frames=stacks[0]) for kind, value in panics)


def _parse(text: str, max_frames: int) -> tuple[ExceptionInfo, ...]:
    max_frames = max(1, max_frames)
    try:
        language = detect_language(text)
        if language == "python":
            return _parse_python(text, max_frames)
        if language == "go":
            return _parse_go(text, max_frames)
        if language == "node":
            return _parse_node(text, max_frames)
        if language == "java":
            return _parse_java(text, max_frames)
    except Exception:  # a parser bug on hostile text must never take the consumer down
        return ()
    return ()


def detect_language(text: str) -> str:
    """Guess the runtime that printed `text`: python, go, node, java, or '' when it is no known trace."""
    if "Traceback (most recent call last):" in text:
        return "python"
    if "goroutine " in text and ("panic: " in text or "fatal error: " in text or " [running]:" in text):
        return "go"
    match = _NODE_FRAME_LINE.search(text)
    if match is None:
        return "go" if text.startswith(("panic: ", "fatal error: ")) else ""
    return "node" if _NODE_LOCATION.search(match.group()) else "java"


# ---------------------------------------------------------------- Java (and Kotlin, Scala on the JVM)


def _split_type(line: str) -> tuple[str, str] | None:
    """`pkg.Type: message` → (type, message) when the part before ': ' is an identifier."""
    if line.startswith("Exception in thread "):
        quote = line.find('" ', len("Exception in thread "))
        line = line[quote + 2 :] if quote >= 0 else line
    head, sep, message = line.partition(": ")
    if not sep and head.endswith(":"):
        head = head[:-1]
    head = head.strip()
    if len(head) > 512 or not _IDENTIFIER.fullmatch(head):
        return None
    return head, message


@lru_cache(maxsize=16384)
def _java_frame(line: str) -> Frame:
    body = line[3:].strip()
    paren = body.find("(")
    name = body[:paren] if paren > 0 else body
    close = body.find(")", paren)
    location = body[paren + 1 : close if close > paren else len(body)] if paren > 0 else ""
    if "/0x" in name:  # JDK hidden classes: Foo$$Lambda$12/0x0000000800c5b440 → Foo$$Lambda$12
        name = _HIDDEN_CLASS.sub("", name)
    if "/" in name:  # module or class loader prefix: java.base/…, app//…
        name = name.rsplit("/", 1)[1]
    module, dot, function = name.rpartition(".")
    if not dot:
        module, function = "", name
    filename, _, line_text = location.partition(":")
    if filename in ("Native Method", "Unknown Source"):
        filename = ""
    lineno = int(line_text) if line_text.isdigit() and len(line_text) < 10 else None
    return Frame(function=function, filename=filename, module=module, lineno=lineno)


class _Block:
    """One exception of a chain while it is being read."""

    __slots__ = ("frames", "header", "more", "skipped")

    def __init__(self, header: list[str]) -> None:
        self.header = header
        self.frames: list[Frame] = []
        self.more = 0
        self.skipped = 0


def _header_exception(header: list[str], frames: tuple[Frame, ...]) -> ExceptionInfo | None:
    for index, line in enumerate(header[:_MAX_HEADER_LINES]):
        parsed = _split_type(line)
        if parsed is not None:
            rest = [parsed[1], *header[index + 1 : _MAX_HEADER_LINES]]
            return ExceptionInfo(type=parsed[0], value="\n".join(rest).strip(), frames=frames)
    return None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _parse_java(text: str, max_frames: int) -> tuple[ExceptionInfo, ...]:
    blocks: list[_Block] = []
    current: _Block | None = None
    pending: list[str] = []
    suppressed_indent = -1  # ≥ 0 while inside a `Suppressed:` block, which stays out of the main chain
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if suppressed_indent >= 0:
            if not stripped.startswith("Caused by: "):
                continue
            indent = _indent(line)
            if indent >= suppressed_indent and suppressed_indent > 0:
                continue  # a cause of the suppressed exception
            suppressed_indent = -1
        if stripped.startswith("at "):
            if current is None:
                current = _Block(pending)
                blocks.append(current)
                pending = []
            if len(current.frames) < max_frames:
                current.frames.append(_java_frame(stripped))
            else:
                current.skipped += 1
        elif stripped.startswith("... ") and stripped.endswith(" more"):
            count = stripped[4:-5].strip()
            if current is not None and count.isdigit() and len(count) < 10:
                current.more = int(count)
        elif stripped.startswith("Caused by: "):
            if len(blocks) >= _MAX_CHAIN:
                break
            current = _Block([stripped[len("Caused by: ") :]])
            blocks.append(current)
        elif stripped.startswith("Suppressed: "):
            suppressed_indent = _indent(line)
        elif current is None:
            pending.append(stripped)
        elif not current.frames and len(current.header) < _MAX_HEADER_LINES:
            current.header.append(stripped)  # a multi-line message
    if not blocks:
        header = _header_exception(pending, ())
        return (header,) if header is not None and _looks_like_exception(header.type) else ()
    return _assemble_java(blocks, max_frames)


def _looks_like_exception(type_name: str) -> bool:
    return "." in type_name or type_name.endswith(("Exception", "Error", "Throwable"))


def _assemble_java(blocks: list[_Block], max_frames: int) -> tuple[ExceptionInfo, ...]:
    chain: list[ExceptionInfo] = []
    enclosing: tuple[Frame, ...] = ()
    for block in blocks:
        frames = block.frames
        if block.more and enclosing:
            # `... N more`: the last N frames are the enclosing trace's last N frames.
            shared = enclosing[max(0, len(enclosing) - block.more) :]
            frames = frames + list(shared[: max(0, max_frames - len(frames))])
        full = tuple(frames)
        info = _header_exception(block.header, full)
        if info is None:
            info = ExceptionInfo(type="", value="\n".join(block.header[:_MAX_HEADER_LINES]), frames=full)
        chain.append(info)
        enclosing = full
    return tuple(chain)


# ---------------------------------------------------------------- Python


@lru_cache(maxsize=16384)
def _python_frame(line: str) -> Frame | None:
    match = _PY_FRAME.fullmatch(line)
    if match is None:
        return None
    path, lineno, function = match.group(1), match.group(2), match.group(3) or ""
    return Frame(
        function=function.strip(),
        filename=path,
        abs_path=path,
        lineno=int(lineno) if len(lineno) < 10 else None,
    )


def _parse_python(text: str, max_frames: int) -> tuple[ExceptionInfo, ...]:
    printed: list[ExceptionInfo] = []  # in print order: root cause first
    frames: list[Frame] = []
    message: list[str] = []
    in_traceback = False

    def close() -> None:
        if message and len(printed) < _MAX_CHAIN:
            parsed = _split_type(message[0]) or ("", message[0])
            value = "\n".join([parsed[1], *message[1:_MAX_HEADER_LINES]]).strip()
            innermost_first = tuple(reversed(frames[-max_frames:]))
            printed.append(ExceptionInfo(type=parsed[0], value=value, frames=innermost_first))
        frames.clear()
        message.clear()

    for raw_line in text.splitlines():
        # Exception groups print their top level behind "  | "; deeper members stay indented and skipped.
        line = raw_line[4:] if raw_line.startswith("  | ") else raw_line
        if line.startswith("  + "):
            line = line[4:]
        stripped = line.strip()
        if stripped.endswith("Traceback (most recent call last):"):
            close()
            in_traceback = True
        elif not in_traceback:
            continue
        elif stripped in _PY_CHAIN_MARKERS:
            close()
            in_traceback = False
        elif line[:1] in (" ", "\t"):
            if not message and stripped.startswith("File "):
                frame = _python_frame(stripped)
                if frame is not None:
                    frames.append(frame)
                    if len(frames) > 2 * max_frames:
                        del frames[:max_frames]
        elif stripped:
            message.append(stripped)
    close()
    return tuple(reversed(printed))


# ---------------------------------------------------------------- Node.js / V8


@lru_cache(maxsize=16384)
def _node_frame(line: str) -> Frame:
    body = line[3:].strip()
    function, location = "", body.removeprefix("async ")
    if body.endswith(")"):
        open_paren = body.find(" (")
        if open_paren >= 0:
            function, location = body[:open_paren], body[open_paren + 2 : -1]
    path, lineno = location, None
    head, sep, column = location.rpartition(":")
    if sep and column.isdigit():
        before, sep, line_text = head.rpartition(":")
        if sep and line_text.isdigit() and len(line_text) < 10:
            path, lineno = before, int(line_text)
        elif len(column) < 10:
            path, lineno = head, int(column)
    if lineno is None and "/" not in path and "\\" not in path:
        path = ""  # `native`, `index 0`, `<anonymous>`: no source file
    return Frame(function=function or "<anonymous>", filename=path, abs_path=path, lineno=lineno)


def _node_header(lines: list[str]) -> ExceptionInfo:
    for index, line in enumerate(lines[:_MAX_HEADER_LINES]):
        candidate = line.removeprefix("Uncaught ")
        head, _, message = candidate.partition(": ")
        if _NODE_TYPE.fullmatch(head.rstrip(":")):
            rest = "\n".join([message, *lines[index + 1 : _MAX_HEADER_LINES]]).strip()
            return ExceptionInfo(type=head.rstrip(":"), value=rest)
    return ExceptionInfo(type="Error", value="\n".join(lines[:_MAX_HEADER_LINES]))


def _parse_node(text: str, max_frames: int) -> tuple[ExceptionInfo, ...]:
    chain: list[ExceptionInfo] = []
    header: list[str] = []
    frames: list[Frame] = []

    def close() -> None:
        if (header or frames) and len(chain) < _MAX_CHAIN:
            info = _node_header(header)
            chain.append(ExceptionInfo(type=info.type, value=info.value, frames=tuple(frames)))

    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("at "):
            if len(frames) < max_frames:
                frames.append(_node_frame(stripped.removesuffix(" {")))
        elif stripped.startswith("[cause]: "):
            close()
            header, frames = [stripped[len("[cause]: ") :].rstrip(" {")], []
        elif stripped and not frames:
            header.append(stripped.rstrip(" {"))
        # after the frames: `{`, `code: 'E…'`, `}` and "... N lines matching cause" are decoration
    close()
    return tuple(chain)


# ---------------------------------------------------------------- Go


def _go_function(line: str) -> tuple[str, str]:
    name = line
    if name.endswith(")"):
        name = name[: name.rfind("(")]
    slash = name.rfind("/")
    dot = name.find(".", slash + 1)
    if dot <= 0:
        return "", name
    return name[:dot], name[dot + 1 :]


@lru_cache(maxsize=16384)
def _go_frame(function_line: str, location_line: str) -> Frame:
    module, function = _go_function(function_line)
    location = location_line.strip().partition(" +0x")[0]
    path, sep, line_text = location.rpartition(":")
    if not sep:
        path, line_text = location, ""
    lineno = int(line_text) if line_text.isdigit() and len(line_text) < 10 else None
    return Frame(function=function, filename=path, abs_path=path, module=module, lineno=lineno)


def _go_panics(lines: list[str]) -> list[tuple[str, str]]:
    """The panic lines, newest first: a re-panic prints the earlier one (`[recovered]`) first."""
    panics: list[tuple[str, str]] = []
    for line in lines:
        if line.startswith("goroutine "):
            break
        stripped = line.strip()
        for prefix, kind in (("panic: ", "panic"), ("fatal error: ", "fatal error")):
            if stripped.startswith(prefix) and len(panics) < _MAX_CHAIN:
                value = stripped[len(prefix) :].removesuffix(" [recovered]").removesuffix(" [recovered, repanicked]")
                if value.startswith("runtime error: "):
                    kind, value = "runtime.Error", value[len("runtime error: ") :]
                panics.append((kind, value))
    return list(reversed(panics))


def _parse_go(text: str, max_frames: int) -> tuple[ExceptionInfo, ...]:
    lines = text.splitlines()
    panics = _go_panics(lines)
    start = -1
    for index, line in enumerate(lines):
        if line.startswith("goroutine ") and line.rstrip().endswith(":"):
            if start < 0:
                start = index
            if "[running" in line:  # the goroutine that panicked
                start = index
                break
    frames: list[Frame] = []
    if start >= 0:
        index = start + 1
        while index + 1 < len(lines) and len(frames) < max_frames:
            function_line, location_line = lines[index].strip(), lines[index + 1]
            if not function_line or function_line.startswith("goroutine "):
                break
            if function_line.startswith("created by ") or not location_line[:1].isspace():
                index += 1 if not location_line[:1].isspace() else 2
                continue
            frames.append(_go_frame(function_line, location_line))
            index += 2
    if not panics:
        if not frames:
            return ()
        panics = [("panic", "")]
    frozen = tuple(frames)
    return tuple(ExceptionInfo(type=kind, value=value, frames=frozen) for kind, value in panics)


_Splitter = Callable[[str], "tuple[list[str], str] | None"]
_Rebuilder = Callable[[list[str], "tuple[tuple[Frame, ...], ...]"], "tuple[ExceptionInfo, ...]"]
_SPLITTERS: dict[str, _Splitter] = {
    "java": _split_java, "python": _split_python, "node": _split_node, "go": _split_go,
}  # fmt: skip
_REBUILDERS: dict[str, _Rebuilder] = {
    "java": _rebuild_java, "python": _rebuild_python, "node": _rebuild_node, "go": _rebuild_go,
}  # fmt: skip
