"""What the four text-trace parsers share: header helpers and the `TraceDialect` each one exports.

A dialect knows how to parse its runtime's trace in full, and how to cut a trace into the lines that
vary between the events of a burst (headers: exception type and message) and the frame regions that
repeat verbatim. `analysis.intake.stacktrace` caches parsed frames per region and rebuilds only the headers.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import NamedTuple

from analysis.cache import OBJECT_BYTES, BoundedCache
from analysis.event import ExceptionInfo, Frame

MAX_CHAIN = 64
"""Exceptions kept per chain."""
MAX_HEADER_LINES = 20
"""Message lines kept per exception."""

Chain = tuple[ExceptionInfo, ...]
Stacks = tuple[tuple[Frame, ...], ...]
Split = tuple[list[str], list[str]]
"""(headers, frame regions) of one trace, or for `match`: (headers, text outside the regions)."""


class TraceDialect(NamedTuple):
    """One runtime's trace format, as the parse cache drives it."""

    language: str
    parse: Callable[[str, int], Chain]
    """Full parse: never raises, frames capped per exception."""
    split: Callable[[str], Split | None]
    """(headers, regions) of a trace, or None when it has no frame region to cache."""
    match: Callable[[str, tuple[str, ...]], Split | None]
    """(headers, outside) when `text` splits into exactly these cached regions with plain headers."""
    rebuild: Callable[[list[str], Stacks], Chain]
    """The chain from fresh headers and the cached frames of the regions."""
    stacks: Callable[[Chain], Stacks]
    """The frames each region holds, in region order, taken from a full parse."""


_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")
# Exception type names repeat across a burst: check each once.
_TYPE_NAMES: BoundedCache[str, bool] = BoundedCache("trace_dialect.type_names", 4096, 4 << 20)


def split_type(line: str) -> tuple[str, str] | None:
    """`pkg.Type: message` → (type, message) when the part before ': ' is an identifier."""
    if line.startswith("Exception in thread "):
        quote = line.find('" ', len("Exception in thread "))
        line = line[quote + 2 :] if quote >= 0 else line
    head, sep, message = line.partition(": ")
    if not sep and head.endswith(":"):
        head = head[:-1]
    head = head.strip()
    known = _TYPE_NAMES.get(head)
    if known is None:
        known = len(head) <= 512 and _IDENTIFIER.fullmatch(head) is not None
        _TYPE_NAMES.put(head, known, sys.getsizeof(head) + OBJECT_BYTES)
    return (head, message) if known else None


def header_lines(header: str, prefix: str = "") -> list[str]:
    """The non-blank, stripped lines of a header, with `prefix` removed from the first."""
    if "\n" in header or "\r" in header:
        lines = [stripped for line in header.splitlines() if (stripped := line.strip())]
    else:  # the usual one-line header; splitlines() also splits on rarer separators, which it lacks
        stripped = header.strip()
        lines = [stripped] if stripped and stripped.isprintable() else header_lines(header + "\n")
    if prefix and lines and lines[0].startswith(prefix):
        lines[0] = lines[0][len(prefix) :]
    return lines


RARE_BREAK = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
"""Line breaks of `str.splitlines` besides the newline: the full parsers split there too."""


def steers(header: str, prefixes: tuple[str, ...], line_start: re.Pattern[str], opened: bool) -> bool:
    """Whether a header holds a line the full parser reads as frame or block syntax (so no rebuild).

    `opened`: the first line is the block opener the split put there (`Caused by: …`), not a message.
    """
    if not opened and header.lstrip(" \t").startswith(prefixes):
        return True
    if not header.isprintable() and RARE_BREAK.search(header) is not None:
        return True  # the full parser's splitlines() also breaks there: whatever follows, let it read it
    return "\n" in header and line_start.search(header) is not None


def chain_in_order(chain: Chain) -> Stacks:
    """Frames of each exception in chain order (regions print outermost first)."""
    return tuple(exception.frames for exception in chain)
