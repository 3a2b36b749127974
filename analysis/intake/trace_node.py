"""Node.js / V8 stack traces: `at` frames with `file:line:column`, `[cause]:` chains."""

from __future__ import annotations

import re
import sys

from analysis.cache import OBJECT_BYTES, BoundedCache, memoize
from analysis.event import ExceptionInfo, Frame, new_exception
from analysis.intake.trace_dialect import (
    MAX_CHAIN,
    MAX_HEADER_LINES,
    Chain,
    Split,
    Stacks,
    TraceDialect,
    chain_in_order,
    header_lines,
)
from analysis.intake.trace_java import match_cached, one_line, split_blocks

_TYPE = re.compile(r"[A-Za-z_$][\w$.]*(?: \[[\w-]+\])?")
_FRAME_START = re.compile(r"\n[ \t]+at ")
_CAUSE = re.compile(r"\n[ \t]*\[cause\]: ")
# Lines the full parser reads as frames or causes; in a header they mean the slow path.
_STEERING = ("at ", "[cause]: ")
_STEERING_LINE = re.compile(r"\n[ \t]*(?:at |\[cause\]: )")


@memoize("trace_node.frame", 16384, 8 << 20)
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
        # `native`, `<anonymous>`, `index 0`: no source file; the engine's own marker stays as abs_path,
        # so frame keys can leave such frames out
        return Frame(function or "<anonymous>", "", path if path in _NO_SOURCE else "", "", None)
    return Frame(function or "<anonymous>", path, path, "", lineno)


_NO_SOURCE = frozenset({"<anonymous>", "native", "[native code]"})
_TYPES: BoundedCache[str, bool] = BoundedCache("trace_node.types", 4096, 4 << 20)  # names repeat in a burst


def _is_type(name: str) -> bool:
    known = _TYPES.get(name)
    if known is None:
        known = _TYPE.fullmatch(name) is not None
        _TYPES.put(name, known, sys.getsizeof(name) + OBJECT_BYTES)
    return known


def _header(lines: list[str], frames: tuple[Frame, ...]) -> ExceptionInfo:
    for index, line in enumerate(lines[:MAX_HEADER_LINES]):
        candidate = line.removeprefix("Uncaught ")
        head, _, message = candidate.partition(": ")
        if _is_type(head.rstrip(":")):
            rest = "\n".join([message, *lines[index + 1 : MAX_HEADER_LINES]]).strip()
            return new_exception(head.rstrip(":"), rest, frames)
    return new_exception("Error", "\n".join(lines[:MAX_HEADER_LINES]), frames)


def parse_node(text: str, max_frames: int) -> Chain:
    """Every error of a V8 trace and its `[cause]:` chain, outermost first."""
    chain: list[ExceptionInfo] = []
    header: list[str] = []
    frames: list[Frame] = []

    def close() -> None:
        if (header or frames) and len(chain) < MAX_CHAIN:
            chain.append(_header(header, tuple(frames)))

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


def _split(text: str) -> Split | None:
    return split_blocks(text, _FRAME_START, _CAUSE)


def _match(text: str, regions: tuple[str, ...]) -> Split | None:
    return match_cached(text, regions, _FRAME_START, _CAUSE, _STEERING, _STEERING_LINE, "[cause]: ")


def _rebuild(headers: list[str], stacks: Stacks) -> Chain:
    if len(headers) == 1 and len(stacks) == 1 and (line := one_line(headers[0])) is not None:
        return (_header([line.rstrip(" {")], stacks[0]),)
    chain = []
    for index, (header, frames) in enumerate(zip(headers, stacks, strict=True)):
        lines = [line.rstrip(" {") for line in header_lines(header, "[cause]: " if index else "")]
        chain.append(_header(lines, frames))
    return tuple(chain)


DIALECT = TraceDialect("node", parse_node, _split, _match, _rebuild, chain_in_order)
