"""Kafka message bytes → `ErrorEvent`s, for the four input shapes of the design (native, ECS, OTLP, logstash).

Anything that can never become an event raises `BadInput` with one bounded reason code, so the consumer
can route it to the DLQ. Decoding is the hot path: no pydantic, no regex per event, a field costs one type
check, and the frames of a repeated trace are built once and shared (which also lets the fingerprint cache
hit by identity). OTLP lives in `analysis.intake.otlp`, typed field reads in `analysis.intake.field`.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from analysis.errors import BadInput
from analysis.event import ErrorEvent, ExceptionInfo, Frame, new_event, new_exception
from analysis.intake.field import get_path, identifier, level, require, text, text_chain, timestamp
from analysis.intake.otlp import decode_otlp

BAD_INPUT_REASONS = (
    "too_large", "invalid_utf8", "not_json", "not_object", "too_deep", "wrong_type", "no_error",
    "missing_server",
)  # fmt: skip
"""Every reason `decode_message` can raise; the DLQ metric's `reason` label takes only these values."""

_MAX_CHAIN = 64
_FRAMES_CACHE_SIZE = 2048
_FRAMES_CACHE_MAX_KEY = 64 * 1024
_FRAMES_KEY_TAIL = 64

_NATIVE_KEYS = frozenset({"server_id", "timestamp", "level", "logger", "message", "commit", "tenant", "exception"})
_ECS_KEYS = frozenset({
    "@timestamp", "message", "service.name", "service.version", "log.level", "log.logger", "error", "log",
    "error.type", "error.message", "error.stack_trace", "organization.id", "labels.tenant", "tenant",
})  # fmt: skip
_ECS_MARKERS = frozenset({"ecs.version", "log.level", "service.name", "error.stack_trace", "error.type", "ecs"})
# ECS fields may also come nested (`"error": {"type": …}`): parent object → the fields read from it.
_ECS_NESTED = {
    "error": ("stack_trace", "type", "message"), "service": ("name", "version"), "log": ("level", "logger"),
    "organization": ("id",), "labels": ("tenant",),
}  # fmt: skip
_ECS_PARENTS = frozenset(_ECS_NESTED)
_LOGSTASH_MARKERS = frozenset({"logger_name", "stack_trace", "level_value", "@version", "thread_name"})
_FOREIGN_MARKERS = _ECS_MARKERS | _LOGSTASH_MARKERS
_LOGSTASH_KEYS = frozenset({"@timestamp", "message", "logger_name", "level", "stack_trace", "tenant", "commit"})
_LOGSTASH_SERVER_FIELDS = ("app_name", "service", "service.name", "appName", "application", "HOSTNAME")


class DecodeConfig(BaseModel):
    """Limits and field choices for decoding; composed into the service settings."""

    model_config = ConfigDict(frozen=True)

    max_message_bytes: int = Field(default=1 << 20, ge=1, description="Larger messages go to the DLQ.")
    max_depth: int = Field(default=64, ge=2, description="Deeper JSON nesting goes to the DLQ.")
    commit_field: str | None = Field(default=None, description="Dotted path of the deployed commit field.")
    max_frames: int = Field(default=2000, ge=1, description="Frames kept per exception, innermost first.")
    in_app_prefixes: tuple[str, ...] = Field(default=(), description="Module or path prefixes of own code.")


def decode_message(raw: bytes, config: DecodeConfig, received_at: float | None = None) -> list[ErrorEvent]:
    """Decode one Kafka message into its error events (several for an OTLP batch).

    `received_at` (epoch seconds, e.g. the Kafka timestamp) stands in for a missing or unusable timestamp.
    Raises `BadInput` with a reason from `BAD_INPUT_REASONS`; never anything else.
    """
    if len(raw) > config.max_message_bytes:
        raise BadInput("too_large", f"{len(raw)} bytes > {config.max_message_bytes}")
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _undecodable(raw, str(exc)) from None
    if type(doc) is not dict:
        if isinstance(doc, list) and _too_deep(doc, config.max_depth):
            raise BadInput("too_deep", f"nesting over {config.max_depth}")
        raise BadInput("not_object", type(doc).__name__)
    fallback = received_at if received_at is not None else time.time()
    if "resourceLogs" in doc:
        events = decode_otlp(doc, config.commit_field, config.max_frames, fallback)
    elif "@timestamp" in doc or not _FOREIGN_MARKERS.isdisjoint(doc):
        if not _ECS_MARKERS.isdisjoint(doc) or type(doc.get("service")) is dict:
            events = [_decode_ecs(doc, config, fallback)]
        else:
            events = [_decode_logstash(doc, config, fallback)]
    else:
        events = [_decode_native(doc, config, fallback)]
    for event in events:  # interpreted fields are type-checked; only the kept unknown ones can nest
        for value in event.extra.values():
            if type(value) is dict or type(value) is list:  # the usual extra holds scalars only
                if _too_deep(event.extra, config.max_depth):
                    raise BadInput("too_deep", f"nesting over {config.max_depth}")
                break
    return events


def _undecodable(raw: bytes, message: str) -> BadInput:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return BadInput("invalid_utf8", f"byte {exc.start}")
    if "depth" in message or "recursion" in message.lower():
        return BadInput("too_deep", "nesting over the JSON parser's limit")
    if "surrogate" in message:
        return BadInput("invalid_utf8", "lone surrogate escape")
    return BadInput("not_json", message[:120])


def _too_deep(root: Any, limit: int) -> bool:
    """Iterative depth check (the root counts as level 1), so hostile nesting cannot blow the stack."""
    if type(root) is dict:  # the usual extra: a few scalars, nothing to walk
        for value in root.values():
            if type(value) is dict or type(value) is list:
                break
        else:
            return False
    stack: list[tuple[Any, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        for child in node.values() if type(node) is dict else node:
            if type(child) is dict or type(child) is list:
                stack.append((child, depth + 1))
    return False


# ---------------------------------------------------------------- native frames


_FRAMES_CACHE: OrderedDict[tuple[int, bytes, int], list[tuple[bytes, tuple[Frame, ...]]]] = OrderedDict()


def _native_frames(value: Any, max_frames: int) -> tuple[Frame, ...]:
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
        for cached_json, cached in bucket:
            if cached_json == dumped:
                return cached
    frames = tuple([_native_frame(item) for item in reversed(value[-max_frames:])])
    if dumped and len(dumped) <= _FRAMES_CACHE_MAX_KEY:
        if bucket is None:
            if len(_FRAMES_CACHE) >= _FRAMES_CACHE_SIZE:
                _FRAMES_CACHE.popitem(last=False)  # O(1), unlike a dict's first key after deletions
            _FRAMES_CACHE[key] = [(dumped, frames)]
        else:
            bucket.append((dumped, frames))
            del bucket[:-8]
    return frames


def _native_frame(item: Any) -> Frame:
    if type(item) is not dict:
        raise BadInput("wrong_type", "a stack frame is not an object")
    lineno = item.get("lineno")
    if lineno is not None and type(lineno) is not int:
        raise BadInput("wrong_type", "frame lineno is not an integer")
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


def _native_exception(value: Any, max_frames: int) -> ExceptionInfo | None:
    if type(value) is not dict:
        raise BadInput("wrong_type", "exception is not an object")
    info = new_exception(
        text(value.get("type"), "exception.type"),
        text(value.get("value"), "exception.value"),
        _native_frames(value.get("stacktrace"), max_frames),
    )
    return info if info.type or info.value or info.frames else None


# ---------------------------------------------------------------- shapes
# Positional ErrorEvent calls (field order server_id … extra): keyword calls cost a third more per event.


def _decode_native(doc: dict[str, Any], config: DecodeConfig, fallback: float) -> ErrorEvent:
    chain: tuple[ExceptionInfo, ...] = ()
    exception = doc.get("exception")
    if exception is not None:
        outer = _native_exception(exception, config.max_frames)
        chained = exception.get("chained") or []
        if type(chained) is not list:
            raise BadInput("wrong_type", "exception.chained is not a list")
        if chained:
            causes = [_native_exception(cause, config.max_frames) for cause in chained[: _MAX_CHAIN - 1]]
            chain = tuple([info for info in (outer, *causes) if info is not None])
        elif outer is not None:
            chain = (outer,)
    get = doc.get
    server_id = get("server_id")
    if type(server_id) is not str:
        server_id = text(server_id, "server_id")
    message = get("message")
    if type(message) is not str or not message or not server_id:
        message = require("native", server_id, text(message, "message"), chain)
    return new_event(
        server_id,
        timestamp(get("timestamp"), fallback),
        message,
        level(get("level"), "level"),
        text(get("logger"), "logger"),
        _commit(doc, config, "commit"),
        identifier(get("tenant"), "tenant") or "default",
        chain,
        "",
        "native",
        {key: value for key, value in doc.items() if key not in _NATIVE_KEYS},
    )


def _commit(doc: dict[str, Any], config: DecodeConfig, default_field: str) -> str | None:
    field = config.commit_field or default_field
    return identifier(get_path(doc, field), field) or None


def _flatten_ecs(doc: dict[str, Any]) -> dict[str, Any]:
    """A copy of `doc` where nested ECS fields are also under their dotted names (a dotted value wins)."""
    flat = dict(doc)
    for parent, keys in _ECS_NESTED.items():
        nested = doc.get(parent)
        if type(nested) is dict:
            for key in keys:
                dotted = f"{parent}.{key}"
                if doc.get(dotted) is None:
                    flat[dotted] = nested.get(key)
    return flat


def _decode_ecs(doc: dict[str, Any], config: DecodeConfig, fallback: float) -> ErrorEvent:
    fields = doc if _ECS_PARENTS.isdisjoint(doc) else _flatten_ecs(doc)
    get = fields.get
    trace = get("error.stack_trace")
    if type(trace) is not str:
        trace = text(trace, "error.stack_trace")
    chain = text_chain(
        trace,
        text(get("error.type"), "error.type"),
        text(get("error.message"), "error.message"),
        config.max_frames,
    )
    server_id = get("service.name")
    if type(server_id) is not str:
        server_id = text(server_id, "service.name")
    message = get("message")
    if type(message) is not str or not message or not server_id:
        message = require("ecs", server_id, text(message, "message"), chain)
    commit = get_path(doc, config.commit_field) if config.commit_field else get("service.version")
    tenant = get("organization.id") or get("labels.tenant") or get("tenant")
    return new_event(
        server_id,
        timestamp(get("@timestamp"), fallback),
        message,
        level(get("log.level"), "log.level"),
        text(get("log.logger"), "log.logger"),
        identifier(commit, "commit") or None,
        identifier(tenant, "tenant") or "default",
        chain,
        trace,
        "ecs",
        {key: value for key, value in doc.items() if key not in _ECS_KEYS},
    )


def _decode_logstash(doc: dict[str, Any], config: DecodeConfig, fallback: float) -> ErrorEvent:
    get = doc.get
    trace = get("stack_trace")
    if type(trace) is not str:
        trace = text(trace, "stack_trace")
    server_id = ""
    for field in _LOGSTASH_SERVER_FIELDS:
        candidate = get(field)
        if candidate is None and "." in field:
            candidate = get_path(doc, field)
        if type(candidate) is str and candidate:  # custom fields vary; a non-string one is not the name
            server_id = candidate
            break
    chain = text_chain(trace, "", "", config.max_frames)
    message = get("message")
    if type(message) is not str or not message or not server_id:
        message = require("logstash", server_id, text(message, "message"), chain)
    return new_event(
        server_id,
        timestamp(get("@timestamp"), fallback),
        message,
        level(get("level"), "level"),
        text(get("logger_name"), "logger_name"),
        _commit(doc, config, "commit"),
        identifier(get("tenant"), "tenant") or "default",
        chain,
        trace,
        "logstash",
        {key: value for key, value in doc.items() if key not in _LOGSTASH_KEYS},
    )
