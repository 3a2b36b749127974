"""Typed reads of the fields of a decoded JSON record, shared by every input shape's decoder.

A field of the wrong type raises `BadInput("wrong_type")`; an absent one reads as empty. These run for
every event, so the common case (a string that is there) costs one type check and nothing else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from analysis.errors import BadInput
from analysis.event import ExceptionInfo, Shape, new_exception
from analysis.intake.stacktrace import exception_line, parse_trace

_LATEST_EPOCH = 1e10  # year 2286: anything later is a unit mix-up, not a time


def get_path(doc: dict[str, Any], path: str) -> Any:
    """`a.b.c` as a flat dotted key or as nested objects (both appear in the wild)."""
    value = doc.get(path)
    if value is not None or "." not in path:
        return value
    node: Any = doc
    for part in path.split("."):
        if type(node) is not dict:
            return None
        node = node.get(part)
    return node


def text(value: Any, field: str) -> str:
    """A string field: '' when absent, `wrong_type` when it holds anything but a string."""
    if type(value) is str:
        return value
    if value is None:
        return ""
    raise BadInput("wrong_type", f"{field} is {type(value).__name__}, expected string")


MAX_ID_CHARS = 256
"""The longest server id, tenant or commit: each goes into every analysis, key and metric label, so one
of 300k characters made an analysis event over the broker's limit, and its publish failed for ever."""


def identifier(value: Any, field: str) -> str:
    """Tenant and commit fields: strings, or integers some producers use for ids; `id_too_long` past
    `MAX_ID_CHARS`."""
    found = str(value) if type(value) is int else text(value, field)
    if len(found) > MAX_ID_CHARS:
        raise BadInput("id_too_long", f"{field} is {len(found)} characters, over {MAX_ID_CHARS}")
    return found


def tenant(value: Any, pinned: str) -> str:
    """The event's tenant: its own field (`identifier`), else the deployment's `pinned` one, else `default`.
    With a pinned tenant, an event naming another is `tenant_mismatch`: the producer may not choose it."""
    named = identifier(value, "tenant")
    if pinned and named and named != pinned:
        raise BadInput("tenant_mismatch", f"the event names a tenant other than this deployment's ({pinned})")
    return named or pinned or "default"


def timestamp(value: Any, fallback: float) -> float:
    """ISO-8601 text or an epoch number (s, ms, µs or ns, told apart by magnitude) → epoch seconds."""
    if type(value) is float and 0 <= value <= _LATEST_EPOCH:  # epoch seconds, the usual number: as below
        return value
    if type(value) is str:
        if len(value) == 24 and value[23] == "Z" and value[19] == ".":  # …T10:14:03.551Z, the usual form
            second = _PLAIN_SECONDS.get(value[:19])
            millis = value[20:23]
            if second is not None and millis.isdigit() and millis.isascii():
                return second + int(millis) / 1000  # == float(".551"): both are correctly rounded
        try:
            seconds = _iso_seconds(value) if value[4:5] == "-" else float(value)
        except (ValueError, OverflowError):
            return fallback  # an unusual format is no reason to lose the error
    elif type(value) is int or type(value) is float:
        seconds = float(value)
    elif value is None:
        return fallback
    else:
        raise BadInput("wrong_type", f"timestamp is {type(value).__name__}")
    magnitude = abs(seconds)
    if magnitude > 1e17:
        seconds /= 1e9
    elif magnitude > 1e14:
        seconds /= 1e6
    elif magnitude > 1e11:
        seconds /= 1e3
    return _in_range(seconds, fallback)


def _in_range(seconds: float, fallback: float) -> float:
    return seconds if math.isfinite(seconds) and 0 <= seconds <= _LATEST_EPOCH else fallback


def _iso_seconds(value: str) -> float:
    # Events of a burst share their second: cache the whole-second part of UTC times (…T10:14:03.551Z).
    suffix = value[19:]
    if suffix == "Z" or (suffix[:1] == "." and suffix[-1:] == "Z" and suffix[1:-1].isdigit()):
        second = _SECONDS.get(value[:19])
        if second is None:
            if len(_SECONDS) >= 4096:
                _SECONDS.clear()
                _PLAIN_SECONDS.clear()
            second = _SECONDS[value[:19]] = _iso_seconds(value[:19] + "+00:00")
            if 0 <= second < _LATEST_EPOCH - 1:  # plus a fraction, still in range and never rescaled
                _PLAIN_SECONDS[value[:19]] = second
        return second + (float(suffix[:-1]) if len(suffix) > 1 else 0.0)
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


_SECONDS: dict[str, float] = {}
_PLAIN_SECONDS: dict[str, float] = {}


def level(value: Any, field: str) -> str:
    """A log level, lower case; 'error' when absent. Numeric levels are read on the pino/bunyan scale."""
    if type(value) is int:
        return next((name for floor, name in _NUMERIC_LEVELS if value >= floor), "trace")
    return text(value, field).lower() or "error"


_NUMERIC_LEVELS = ((60, "fatal"), (50, "error"), (40, "warn"), (30, "info"), (20, "debug"))


def summary(chain: tuple[ExceptionInfo, ...]) -> str:
    """`Type: value` of the outermost exception, the message of an event that logged none."""
    first = chain[0]
    return f"{first.type}: {first.value}" if first.type and first.value else first.type or first.value


def require(shape: Shape, server_id: str, message: str, chain: tuple[ExceptionInfo, ...]) -> str:
    """The event's message; raises when the record carries no error or names no server."""
    if not message and not chain:
        raise BadInput("no_error", "no message and no exception")
    if not server_id:
        raise BadInput("missing_server", f"{shape} event without a server id")
    if len(server_id) > MAX_ID_CHARS:
        raise BadInput("id_too_long", f"server id is {len(server_id)} characters, over {MAX_ID_CHARS}")
    return message or summary(chain)


def trace_chain(traces: Sequence[str], message: str, max_frames: int) -> tuple[tuple[ExceptionInfo, ...], str]:
    """(chain, raw trace) of the first of the trace fields' `traces` that holds a trace, else of a trace logged
    as the `message` itself; else ((), the first non-empty trace field, which `declared_chain` reads)."""
    first = ""
    for trace in traces:
        if trace:
            parsed = parse_trace(trace, max_frames)
            if parsed:
                return parsed, trace
            first = first or trace
    if "\n" in message:
        parsed = parse_trace(message, max_frames)
        if parsed:
            return parsed, message
    return (), first


def declared_chain(exception_type: str, exception_message: str, trace: str) -> tuple[ExceptionInfo, ...]:
    """The one exception of a record without a trace: from its type and message fields, else from the first
    line of a trace field that is no trace, read as `Type: message` when it names an exception class
    (`exception_line`) and as the message otherwise; () when there are none."""
    if exception_type or exception_message:
        return (new_exception(exception_type, exception_message),)
    line = trace.strip().partition("\n")[0][:1000]
    if not line:
        return ()
    named = exception_line(line)
    return (new_exception(*named) if named is not None else new_exception("", line),)
