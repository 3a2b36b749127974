"""Structured exceptions (the native shape's `exception` object): type, value, frames and chained causes.

Frames arrive caller first, as SDKs send them, and are returned innermost first. The frames of a
repeated trace are built once and shared, which also lets the fingerprint cache hit by identity.
"""

from __future__ import annotations

import sys
from typing import Any

import orjson

from analysis.cache import OBJECT_BYTES, BoundedCache
from analysis.errors import BadInput
from analysis.event import ExceptionInfo, Frame, new_exception
from analysis.intake.field import text

_MAX_CHAIN = 64
_MAX_LINE = 999_999_999  # a line number as the text traces' parsers read one: nine digits at most
_FRAMES_CACHE_SIZE = 2048
_FRAMES_CACHE_MAX_KEY = 64 * 1024
_FRAMES_KEY_TAIL = 64


def structured_chain(exception: dict[str, Any], max_frames: int) -> tuple[ExceptionInfo, ...]:
    """The chain of a structured exception, outermost first: the exception, then its `chained` causes."""
    outer = _exception(exception, max_frames)
    chained = exception.get("chained") or []
    if type(chained) is not list:
        raise BadInput("wrong_type", "exception.chained is not a list")
    if chained:
        causes = [_exception(cause, max_frames) for cause in chained[: _MAX_CHAIN - 1]]
        return tuple([info for info in (outer, *causes) if info is not None])
    return (outer,) if outer is not None else ()


# A bucket's entries: the frames' JSON text, its frames, and the bytes charged for them (see _frames).
_FRAMES_CACHE: BoundedCache[tuple[int, bytes, int], list[tuple[bytes, tuple[Frame, ...], int]]] = BoundedCache(
    "structured.frames", _FRAMES_CACHE_SIZE, 48 << 20)


def _frames(value: Any, max_frames: int) -> tuple[Frame, ...]:
    """Structured frames, caller first as sent, returned innermost first; shared for a repeated trace."""
    if value is None:
        return ()
    if type(value) is dict:  # Sentry's own layout: {"frames": [...]}
        value = value.get("frames")
    if type(value) is not list:
        raise BadInput("wrong_type", "exception.stacktrace is not a list")
    if not value:
        return ()
    try:
        # The JSON text is an exact key (1 and 1.0 and true differ, unlike ==). Hashing a fresh
        # multi-kilobyte key costs more than the rest: bucket on length and tail, then compare (a memcmp).
        dumped = orjson.dumps(value)
    except orjson.JSONEncodeError:  # nesting past the encoder's limit: validation below says why
        dumped = b""
    key = (len(dumped), dumped[-_FRAMES_KEY_TAIL:], max_frames)
    bucket = _FRAMES_CACHE.get(key) if dumped else None
    if bucket is not None:
        for cached_json, cached, _ in bucket:
            if cached_json == dumped:
                return cached
    frames = tuple([_frame(item) for item in reversed(value[-max_frames:])])
    if dumped and len(dumped) <= _FRAMES_CACHE_MAX_KEY:
        # The frames' strings come out of the JSON text: at most its size again, plus an object per frame.
        entry = (dumped, frames, 2 * sys.getsizeof(dumped) + OBJECT_BYTES * (1 + len(frames)))
        cached_bucket = [*(bucket or ()), entry][-8:]
        _FRAMES_CACHE.put(key, cached_bucket, sum(nbytes for _, _, nbytes in cached_bucket))
    return frames


def _frame(item: Any) -> Frame:
    if type(item) is not dict:
        raise BadInput("wrong_type", "a stack frame is not an object")
    lineno = item.get("lineno")
    if lineno is not None and type(lineno) is not int:
        raise BadInput("wrong_type", "frame lineno is not an integer")
    if lineno is not None and lineno > _MAX_LINE:
        lineno = None  # names no line of any file (and `4111111111111111` would read as a card number)
    in_app = item.get("in_app")
    if in_app is not None and type(in_app) is not bool:
        raise BadInput("wrong_type", "frame in_app is not a boolean")
    return Frame(
        text(item.get("function"), "frame function"),
        text(item.get("filename"), "frame filename"),
        text(item.get("abs_path"), "frame abs_path"),
        text(item.get("module"), "frame module"),
        lineno,
        in_app,
    )


def _exception(value: Any, max_frames: int) -> ExceptionInfo | None:
    if type(value) is not dict:
        raise BadInput("wrong_type", "exception is not an object")
    info = new_exception(
        text(value.get("type"), "exception.type"),
        text(value.get("value"), "exception.value"),
        _frames(value.get("stacktrace"), max_frames),
    )
    return info if info.type or info.value or info.frames else None
