"""JVM stack traces (Java, Kotlin, Scala): `Caused by:` chains, `... N more`, `Suppressed:` blocks."""

from __future__ import annotations

import re

from analysis.cache import memoize
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
    split_type,
    steers,
)

_HIDDEN_CLASS = re.compile(r"/0x[0-9a-fA-F]+")
_FRAME_START = re.compile(r"\n[ \t]*(?:at |\.\.\. \d)")
_CAUSE = re.compile(r"\nCaused by: ")
# Header lines that would steer the full parser differently from a rebuild: take the slow path then.
_STEERING = ("Suppressed: ", "Caused by: ", "... ", "at ")
_STEERING_LINE = re.compile(r"\n[ \t]*(?:Suppressed: |Caused by: |\.\.\. |at )")


@memoize("trace_java.frame", 16384, 8 << 20)
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
    return Frame(function, filename, "", module, lineno)


class _Block:
    """One exception of a chain while it is being read."""

    __slots__ = ("frames", "header", "more", "skipped")

    def __init__(self, header: list[str]) -> None:
        self.header = header
        self.frames: list[Frame] = []
        self.more = 0
        self.skipped = 0


def header_exception(header: list[str], frames: tuple[Frame, ...]) -> ExceptionInfo | None:
    """The exception a header announces: the first line that reads `Type: message`, and what follows."""
    if len(header) == 1:  # the usual case, without the list work below
        parsed = split_type(header[0])
        return None if parsed is None else new_exception(parsed[0], parsed[1].strip(), frames)
    for index, line in enumerate(header[:MAX_HEADER_LINES]):
        parsed = split_type(line)
        if parsed is not None:
            rest = [parsed[1], *header[index + 1 : MAX_HEADER_LINES]]
            return new_exception(parsed[0], "\n".join(rest).strip(), frames)
    return None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def parse_java(text: str, max_frames: int) -> Chain:
    """Every exception of a JVM trace, outermost first; `Suppressed:` blocks are left out."""
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
            if len(blocks) >= MAX_CHAIN:
                break
            current = _Block([stripped[len("Caused by: ") :]])
            blocks.append(current)
        elif stripped.startswith("Suppressed: "):
            suppressed_indent = _indent(line)
        elif current is None:
            pending.append(stripped)
        elif not current.frames and len(current.header) < MAX_HEADER_LINES:
            current.header.append(stripped)  # a multi-line message
    if not blocks:
        header = header_exception(pending, ())
        return (header,) if header is not None and _looks_like_exception(header.type) else ()
    return _assemble(blocks, max_frames)


def _looks_like_exception(type_name: str) -> bool:
    return "." in type_name or type_name.endswith(("Exception", "Error", "Throwable"))


def _assemble(blocks: list[_Block], max_frames: int) -> Chain:
    chain: list[ExceptionInfo] = []
    enclosing: tuple[Frame, ...] = ()
    for block in blocks:
        frames = block.frames
        if block.more and enclosing:
            # `... N more`: the last N frames are the enclosing trace's last N frames.
            shared = enclosing[max(0, len(enclosing) - block.more) :]
            frames = frames + list(shared[: max(0, max_frames - len(frames))])
        full = tuple(frames)
        info = header_exception(block.header, full)
        if info is None:
            info = new_exception("", "\n".join(block.header[:MAX_HEADER_LINES]), full)
        chain.append(info)
        enclosing = full
    return tuple(chain)


def split_blocks(text: str, frame_start: re.Pattern[str], next_header: re.Pattern[str]) -> Split | None:
    """Headers and frame regions of a trace whose blocks are `header, frames` separated by `next_header`."""
    headers: list[str] = []
    regions: list[str] = []
    start = 0
    while True:
        frames = frame_start.search(text, start)
        if frames is None:
            return None  # a block without frames: leave it to the full parser
        header = next_header.search(text, frames.start())
        end = header.start() if header is not None else len(text)
        headers.append(text[start : frames.start()])
        regions.append(text[frames.start() : end])
        if header is None:
            return headers, regions
        start = header.start() + 1


def match_blocks(
    text: str, regions: tuple[str, ...], frame_start: re.Pattern[str], next_header: re.Pattern[str]
) -> list[str] | None:
    """The headers `split_blocks` would return for `text` if its regions are exactly `regions`, else None.

    Only the headers are searched: each region is compared in place (a memcmp), never scanned, and the
    text right after it must open the next block, so the split is the one `split_blocks` would make.
    """
    headers: list[str] = []
    start = 0
    last = len(regions) - 1
    for index, region in enumerate(regions):
        frames = frame_start.search(text, start)
        if frames is None:
            return None
        begin = frames.start()
        if not text.startswith(region, begin):
            return None
        headers.append(text[start:begin])
        end = begin + len(region)
        if index == last:
            return headers if end == len(text) else None
        if next_header.match(text, end) is None:
            return None
        start = end + 1
    return None


def _split(text: str) -> Split | None:
    return split_blocks(text, _FRAME_START, _CAUSE)


def match_suffix(text: str, regions: tuple[str, ...]) -> str | None:
    """The one header `match_blocks` would return for a one-region trace with a one-line header.

    The usual burst event: a single exception printed as `Type: message` and then the cached frames.
    The region opens with the newline before its first frame, so when the text before it holds no
    newline, the first frame the search would find is the region's own: no search needed. None means
    "not this simple case", never "no match": the caller then takes the general path.
    """
    if len(regions) != 1:
        return None
    region = regions[0]
    begin = len(text) - len(region)
    if begin <= 0 or text.find("\n", 0, begin) >= 0 or not text.endswith(region):
        return None
    return text[:begin]


def match_cached(
    text: str, regions: tuple[str, ...], frame_start: re.Pattern[str], cause: re.Pattern[str],
    steering: tuple[str, ...], steering_line: re.Pattern[str], cause_prefix: str,
) -> Split | None:
    """The headers of `text` around cached frame regions, or None when the full parser must read it.

    Shared by the dialects whose causes follow their frames (Java `Caused by: `, Node `[cause]: `).
    """
    header = match_suffix(text, regions)
    if header is not None:
        if steers(header, steering, steering_line, False):
            return None
        return [header], [header]
    headers = match_blocks(text, regions, frame_start, cause)
    if headers is None:
        return None
    for index, header in enumerate(headers):
        # A cause's header opens with its prefix; past that (or anywhere in the first) a steering line
        # means the full parser would read this text differently from the cached one.
        if steers(header, steering, steering_line, index > 0):
            return None
        if index and not header.partition("\n")[0].strip().startswith(cause_prefix):
            return None  # an empty cause line, which the full parser does not read as a cause
    return headers, headers


def _match(text: str, regions: tuple[str, ...]) -> Split | None:
    return match_cached(text, regions, _FRAME_START, _CAUSE, _STEERING, _STEERING_LINE, "Caused by: ")


def one_line(header: str) -> str | None:
    """`header` stripped when it is the single line `header_lines` would keep as is, else None."""
    if "\n" in header or "\r" in header:
        return None
    stripped = header.strip()
    return stripped if stripped and stripped.isprintable() else None


def _rebuild(headers: list[str], stacks: Stacks) -> Chain:
    chain = []
    prefix = ""
    for header, frames in zip(headers, stacks, strict=True):
        line = one_line(header)
        if line is not None:  # the usual `Type: message` line: header_lines and header_exception, inlined
            if prefix and line.startswith(prefix):
                line = line[len(prefix) :]
            parsed = split_type(line)
            chain.append(new_exception("", line, frames) if parsed is None
                         else new_exception(parsed[0], parsed[1].strip(), frames))
        else:
            lines = header_lines(header, prefix)
            if len(lines) > MAX_HEADER_LINES:
                lines = lines[:MAX_HEADER_LINES]
            info = header_exception(lines, frames)
            chain.append(info or new_exception("", "\n".join(lines), frames))
        prefix = "Caused by: "
    return tuple(chain)


DIALECT = TraceDialect("java", parse_java, _split, _match, _rebuild, chain_in_order)
