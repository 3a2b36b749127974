"""Python tracebacks: chained (`During handling…`, `The above exception…`) and exception groups. Two
tracebacks with no chain sentence between them are two failures (a handled error logged, then the crash):
the last is read. What prints after the exception (an exit status, a log record) is not its message."""

from __future__ import annotations

import re

from analysis.cache import memoize
from analysis.event import ExceptionInfo, Frame, new_exception
from analysis.intake.trace_dialect import (
    MAX_CHAIN,
    MAX_HEADER_LINES,
    RARE_BREAK,
    Chain,
    Split,
    Stacks,
    TraceDialect,
    split_type,
)

TRACEBACK = "Traceback (most recent call last):"
CHAIN_MARKERS = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
_FRAME = re.compile(r'File "([^"]*)", line (\d+)(?:, in (.+))?')
_MESSAGE_START = re.compile(r"\n(?=[^ \t\n])(?!> File \")")
_CAUGHT = '> File "'  # loguru marks the frame that caught the error so
_GROUP = "Exception Group"
# A line after the exception's that is no part of its message but what printed next: a log record (a time or
# a level first) or a runner's exit line (`exit status 1`, `Process finished with exit code 1`).
_NEXT_OUTPUT = re.compile(r"\[?[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]|\[?(?:INFO|DEBUG|WARN|WARNING|ERROR|CRITICAL|FATAL"
                          r"|TRACE|NOTICE)\]?[ :|-]|(?i:exit(?:ed with)? (?:status|code) [0-9])"
                          r"|Process finished with exit code|make(?:\[[0-9]+\])?: \*\*\*|npm ERR!")


def _own_lines(message: list[str]) -> list[str]:
    """The lines of an exception's message: up to the one that reads as the next output (its first is its own)."""
    for index in range(1, min(len(message), MAX_HEADER_LINES)):
        if _NEXT_OUTPUT.match(message[index]):
            return message[:index]
    return message[:MAX_HEADER_LINES]


@memoize("trace_python.frame", 16384, 8 << 20)
def _python_frame(line: str) -> Frame | None:
    match = _FRAME.fullmatch(line)
    if match is None:
        return None
    path, lineno, function = match.group(1), match.group(2), match.group(3) or ""
    return Frame(function.strip(), path, path, "", int(lineno) if len(lineno) < 10 else None)


def parse_python(text: str, max_frames: int) -> Chain:
    """Every traceback of a (chained) Python error, outermost first and root cause last."""
    printed: list[ExceptionInfo] = []  # in print order: root cause first
    frames: list[Frame] = []
    message: list[str] = []
    in_traceback = chained = False

    def close() -> None:
        if message and len(printed) < MAX_CHAIN:
            parsed = split_type(message[0]) or ("", message[0])
            value = "\n".join([parsed[1], *_own_lines(message)[1:]]).strip()
            innermost_first = tuple(reversed(frames[-max_frames:]))
            printed.append(new_exception(parsed[0], value, innermost_first))
        frames.clear()
        message.clear()

    for raw_line in text.splitlines():
        # Exception groups print their top level behind "  | "; deeper members stay indented and skipped.
        line = raw_line[4:] if raw_line.startswith("  | ") else raw_line
        if line.startswith("  + "):
            line = line[4:]
        elif line.startswith(_CAUGHT):
            line = f" {line[1:]}"
        stripped = line.strip()
        if stripped.endswith(TRACEBACK):
            close()
            if not chained and raw_line.strip() == TRACEBACK:
                printed.clear()  # no chain sentence since the error before: that one is another failure
            in_traceback, chained = True, False
        elif not in_traceback:
            continue
        elif stripped in CHAIN_MARKERS:
            close()
            in_traceback, chained = False, True
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


def _split(text: str) -> Split | None:
    if _GROUP in text:
        return None
    headers: list[str] = []
    regions: list[str] = []
    position = text.find(TRACEBACK)
    while position >= 0:
        message = _MESSAGE_START.search(text, position)
        if message is None:
            return None
        following = text.find(TRACEBACK, message.end())
        regions.append(text[position : message.start()])
        headers.append(text[message.start() : following if following >= 0 else len(text)])
        position = following
    return headers, regions


def _match(text: str, regions: tuple[str, ...]) -> Split | None:
    """`_split`'s headers when the tracebacks' frame parts are exactly `regions` and the messages plain."""
    first = position = text.find(TRACEBACK)
    if position < 0 or text.find(_GROUP, 0, position) >= 0:
        return None
    headers: list[str] = []
    for region in regions:
        if position < 0 or not text.startswith(region, position):
            return None
        end = position + len(region)
        # The message starts at the first newline followed by an unindented line: right after the region.
        if text[end : end + 1] != "\n" or text[end + 1 : end + 2] in ("", " ", "\t", "\n") or \
                text.startswith(_CAUGHT, end + 1):
            return None
        following = text.find(TRACEBACK, end + 1)
        header = text[end : following if following >= 0 else len(text)]
        # Exception-group gutters (`  | `, `  + `) change how the full parser reads a line: slow path.
        if _GROUP in header or "\n  | " in header or "\n  + " in header or RARE_BREAK.search(header):
            return None
        if following >= 0 and not header.endswith("\n"):
            return None  # `…text Traceback (most recent call last):` would close the message early
        headers.append(header)
        position = following
    if position >= 0:
        return None
    return headers, [text[:first], *headers]


def _rebuild(headers: list[str], stacks: Stacks) -> Chain:
    if len(headers) == 1 and len(stacks) == 1:
        # The usual last line `\nType: message`: the loop below keeps just that line, stripped.
        header = headers[0]
        line = header[1:]
        if (header[:1] == "\n" and line[:1] not in ("", " ", "\t") and "\n" not in line and "\r" not in line
                and line.isprintable()):
            stripped = line.strip()
            if stripped not in CHAIN_MARKERS:
                kind, value = split_type(stripped) or ("", stripped)
                return (new_exception(kind, value.strip(), stacks[0]),)
    printed: list[ExceptionInfo] = []
    chained, header_before = False, ""
    for index, (header, frames) in enumerate(zip(headers, stacks, strict=True)):
        if index and not chained and not header_before.rpartition("\n")[2].strip():
            printed.clear()  # as `parse_python`: the traceback before is another failure
        message = []
        chained = False
        for line in header.splitlines():
            stripped = line.strip()
            if stripped in CHAIN_MARKERS:
                chained = True
                break
            if stripped and line[:1] not in (" ", "\t"):
                message.append(stripped)
        parsed = split_type(message[0]) if message else None
        parsed = parsed or ("", message[0] if message else "")
        value = "\n".join([parsed[1], *_own_lines(message)[1:]]).strip()
        printed.append(new_exception(parsed[0], value, frames))
        header_before = header
    return tuple(reversed(printed))


def _stacks(chain: Chain) -> Stacks:
    return tuple(exception.frames for exception in reversed(chain))


DIALECT = TraceDialect("python", parse_python, _split, _match, _rebuild, _stacks)
