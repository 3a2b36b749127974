"""Kafka message bytes → `ErrorEvent`s, for the four input shapes of the design (native, ECS, OTLP, logstash).

Anything that can never become an event raises `BadInput` with one bounded reason code, so the consumer
can route it to the DLQ. Decoding is the hot path: no pydantic, no regex per event, and the frames of a
repeated trace are built once and shared (which also lets the fingerprint cache hit by identity).
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from analysis.errors import BadInput
from analysis.event import ErrorEvent, ExceptionInfo, Frame, Shape
from analysis.stacktrace import parse_trace

BAD_INPUT_REASONS = (
    "too_large", "invalid_utf8", "not_json", "not_object", "too_deep", "wrong_type", "no_error",
    "missing_server",
)  # fmt: skip
"""Every reason `decode_message` can raise; the DLQ metric's `reason` label takes only these values."""

_MAX_CHAIN = 64
_FRAMES_CACHE_SIZE = 2048
_FRAMES_CACHE_MAX_KEY = 64 * 1024
_LATEST_EPOCH = 1e10  # year 2286: anything later is a unit mix-up, not a time

_NATIVE_KEYS = frozenset({"server_id", "timestamp", "level", "logger", "message", "commit", "tenant", "exception"})
_ECS_KEYS = frozenset({
    "@timestamp", "message", "service.name", "service.version", "log.level", "log.logger", "error", "log",
    "error.type", "error.message", "error.stack_trace", "organization.id", "labels.tenant", "tenant",
})  # fmt: skip
_ECS_MARKERS = frozenset({"ecs.version", "log.level", "service.name", "error.stack_trace", "error.type", "ecs"})
_LOGSTASH_MARKERS = frozenset({"logger_name", "stack_trace", "level_value", "@version", "thread_name"})
_FOREIGN_MARKERS = _ECS_MARKERS | _LOGSTASH_MARKERS
_LOGSTASH_KEYS = frozenset({"@timestamp", "message", "logger_name", "level", "stack_trace", "tenant", "commit"})
_LOGSTASH_SERVER_FIELDS = ("app_name", "service", "service.name", "appName", "application", "HOSTNAME")
_OTEL_COMMIT_ATTRIBUTES = (
    "vcs.ref.head.revision", "vcs.revision", "git.commit.sha", "deployment.commit", "commit",
    "service.version",
)  # fmt: skip
_OTEL_CONSUMED = frozenset({"exception.type", "exception.message", "exception.stacktrace"})
_OTEL_RESOURCE_CONSUMED = frozenset({"service.name", "tenant"})


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
        events = _decode_otel(doc, config, fallback)
    elif "@timestamp" in doc or not _FOREIGN_MARKERS.isdisjoint(doc):
        if not _ECS_MARKERS.isdisjoint(doc) or _is_object(doc.get("service")):
            events = [_decode_ecs(doc, config, fallback)]
        else:
            events = [_decode_logstash(doc, config, fallback)]
    else:
        events = [_decode_native(doc, config, fallback)]
    for event in events:  # interpreted fields are type-checked; only the kept unknown ones can nest
        if event.extra and _too_deep(event.extra, config.max_depth):
            raise BadInput("too_deep", f"nesting over {config.max_depth}")
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


def _is_object(value: object) -> bool:
    return type(value) is dict


# ---------------------------------------------------------------- field access


def _get(doc: dict[str, Any], path: str) -> Any:
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


def _text(value: Any, field: str) -> str:
    """A string field: '' when absent, `wrong_type` when it holds anything but a string."""
    if value is None:
        return ""
    if type(value) is not str:
        raise BadInput("wrong_type", f"{field} is {type(value).__name__}, expected string")
    return value


def _identifier(value: Any, field: str) -> str:
    """Tenant and commit fields: strings, or integers some producers use for ids."""
    if type(value) is int:
        return str(value)
    return _text(value, field)


def _timestamp(value: Any, fallback: float) -> float:
    """ISO-8601 text or an epoch number (s, ms, µs or ns, told apart by magnitude) → epoch seconds."""
    if value is None:
        return fallback
    if type(value) is int or type(value) is float:
        seconds = float(value)
    elif type(value) is str:
        try:
            seconds = _iso_seconds(value) if value[4:5] == "-" else float(value)
        except (ValueError, OverflowError):
            return fallback  # an unusual format is no reason to lose the error
    else:
        raise BadInput("wrong_type", f"timestamp is {type(value).__name__}")
    magnitude = abs(seconds)
    if magnitude > 1e17:
        seconds /= 1e9
    elif magnitude > 1e14:
        seconds /= 1e6
    elif magnitude > 1e11:
        seconds /= 1e3
    return seconds if math.isfinite(seconds) and 0 <= seconds <= _LATEST_EPOCH else fallback


def _iso_seconds(value: str) -> float:
    # Events of a burst share their second: cache the whole-second part of UTC times (…T10:14:03.551Z).
    suffix = value[19:]
    if suffix == "Z" or (suffix[:1] == "." and suffix[-1:] == "Z" and suffix[1:-1].isdigit()):
        second = _SECONDS.get(value[:19])
        if second is None:
            if len(_SECONDS) >= 4096:
                _SECONDS.clear()
            second = _SECONDS[value[:19]] = _iso_seconds(value[:19] + "+00:00")
        return second + (float(suffix[:-1]) if len(suffix) > 1 else 0.0)
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


_SECONDS: dict[str, float] = {}


def _level(value: Any, field: str) -> str:
    return _text(value, field).lower() or "error"


def _commit(doc: dict[str, Any], config: DecodeConfig, default_field: str) -> str | None:
    field = config.commit_field or default_field
    return _identifier(_get(doc, field), field) or None


def _summary(chain: tuple[ExceptionInfo, ...]) -> str:
    first = chain[0]
    return f"{first.type}: {first.value}" if first.type and first.value else first.type or first.value


def _require(shape: Shape, server_id: str, message: str, chain: tuple[ExceptionInfo, ...]) -> str:
    """The event's message; raises when the record carries no error or names no server."""
    if not message and not chain:
        raise BadInput("no_error", "no message and no exception")
    if not server_id:
        raise BadInput("missing_server", f"{shape} event without a server id")
    return message or _summary(chain)


def _field(doc: dict[str, Any], dotted: str, parent: str, key: str) -> Any:
    """An ECS field written flat (`"error.type": …`) or nested (`"error": {"type": …}`)."""
    value = doc.get(dotted)
    if value is None:
        nested = doc.get(parent)
        if type(nested) is dict:
            return nested.get(key)
    return value


# ---------------------------------------------------------------- traces


def _text_chain(trace: str, exception_type: str, exception_message: str, max_frames: int) -> tuple[ExceptionInfo, ...]:
    if trace:
        parsed = parse_trace(trace, max_frames)
        if parsed:
            return parsed
    if exception_type or exception_message:
        return (ExceptionInfo(type=exception_type, value=exception_message),)
    if trace.strip():
        return (ExceptionInfo(type="", value=trace.strip().partition("\n")[0][:1000]),)
    return ()


_FRAMES_CACHE: dict[tuple[bytes, int], tuple[Frame, ...]] = {}


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
        key = (orjson.dumps(value), max_frames)
    except orjson.JSONEncodeError:  # nesting past the encoder's limit: validation below says why
        key = (b"", 0)
    cached = _FRAMES_CACHE.get(key) if key[1] else None
    if cached is not None:
        return cached
    frames = tuple(_native_frame(item) for item in reversed(value[-max_frames:]))
    if key[1] and len(key[0]) <= _FRAMES_CACHE_MAX_KEY:
        if len(_FRAMES_CACHE) >= _FRAMES_CACHE_SIZE:
            _FRAMES_CACHE.pop(next(iter(_FRAMES_CACHE)), None)
        _FRAMES_CACHE[key] = frames
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
        function=_text(item.get("function"), "frame function"),
        filename=_text(item.get("filename"), "frame filename"),
        abs_path=_text(item.get("abs_path"), "frame abs_path"),
        module=_text(item.get("module"), "frame module"),
        lineno=lineno,
        in_app=in_app,
    )


def _native_exception(value: Any, max_frames: int) -> ExceptionInfo | None:
    if type(value) is not dict:
        raise BadInput("wrong_type", "exception is not an object")
    info = ExceptionInfo(
        type=_text(value.get("type"), "exception.type"),
        value=_text(value.get("value"), "exception.value"),
        frames=_native_frames(value.get("stacktrace"), max_frames),
    )
    return info if info.type or info.value or info.frames else None


# ---------------------------------------------------------------- shapes


def _decode_native(doc: dict[str, Any], config: DecodeConfig, fallback: float) -> ErrorEvent:
    chain: list[ExceptionInfo] = []
    exception = doc.get("exception")
    if exception is not None:
        outer = _native_exception(exception, config.max_frames)
        chained = exception.get("chained") or []
        if type(chained) is not list:
            raise BadInput("wrong_type", "exception.chained is not a list")
        causes = (_native_exception(cause, config.max_frames) for cause in chained[: _MAX_CHAIN - 1])
        chain = [info for info in (outer, *causes) if info is not None]
    server_id = _text(doc.get("server_id"), "server_id")
    frozen_chain = tuple(chain)
    message = _require("native", server_id, _text(doc.get("message"), "message"), frozen_chain)
    # Positional: ErrorEvent's field order (server_id … extra); keyword calls cost a third more per event.
    return ErrorEvent(
        server_id,
        _timestamp(doc.get("timestamp"), fallback),
        message,
        _level(doc.get("level"), "level"),
        _text(doc.get("logger"), "logger"),
        _commit(doc, config, "commit"),
        _identifier(doc.get("tenant"), "tenant") or "default",
        frozen_chain,
        "",
        "native",
        {key: value for key, value in doc.items() if key not in _NATIVE_KEYS},
    )


def _decode_ecs(doc: dict[str, Any], config: DecodeConfig, fallback: float) -> ErrorEvent:
    trace = _text(_field(doc, "error.stack_trace", "error", "stack_trace"), "error.stack_trace")
    chain = _text_chain(
        trace,
        _text(_field(doc, "error.type", "error", "type"), "error.type"),
        _text(_field(doc, "error.message", "error", "message"), "error.message"),
        config.max_frames,
    )
    server_id = _text(_field(doc, "service.name", "service", "name"), "service.name")
    message = _require("ecs", server_id, _text(doc.get("message"), "message"), chain)
    if config.commit_field:
        commit = _get(doc, config.commit_field)
    else:
        commit = _field(doc, "service.version", "service", "version")
    tenant = (
        _field(doc, "organization.id", "organization", "id")
        or _field(doc, "labels.tenant", "labels", "tenant")
        or doc.get("tenant")
    )
    return ErrorEvent(
        server_id,
        _timestamp(doc.get("@timestamp"), fallback),
        message,
        _level(_field(doc, "log.level", "log", "level"), "log.level"),
        _text(_field(doc, "log.logger", "log", "logger"), "log.logger"),
        _identifier(commit, "commit") or None,
        _identifier(tenant, "tenant") or "default",
        chain,
        trace,
        "ecs",
        {key: value for key, value in doc.items() if key not in _ECS_KEYS},
    )


def _decode_logstash(doc: dict[str, Any], config: DecodeConfig, fallback: float) -> ErrorEvent:
    trace = _text(doc.get("stack_trace"), "stack_trace")
    server_id = ""
    for field in _LOGSTASH_SERVER_FIELDS:
        candidate = _get(doc, field)
        if type(candidate) is str and candidate:  # custom fields vary; a non-string one is not the name
            server_id = candidate
            break
    chain = _text_chain(trace, "", "", config.max_frames)
    message = _require("logstash", server_id, _text(doc.get("message"), "message"), chain)
    return ErrorEvent(
        server_id,
        _timestamp(doc.get("@timestamp"), fallback),
        message,
        _level(doc.get("level"), "level"),
        _text(doc.get("logger_name"), "logger_name"),
        _commit(doc, config, "commit"),
        _identifier(doc.get("tenant"), "tenant") or "default",
        chain,
        trace,
        "logstash",
        {key: value for key, value in doc.items() if key not in _LOGSTASH_KEYS},
    )


def _otel_value(value: Any, depth: int = 0) -> Any:
    """An OTLP AnyValue ({stringValue: …}, {intValue: "3"}, arrays, kvlists) as a plain value."""
    if type(value) is not dict or depth > 64:
        raise BadInput("too_deep" if depth > 64 else "wrong_type", "attribute value is not an AnyValue")
    for kind, item in value.items():
        if kind == "stringValue" or kind == "bytesValue" or kind == "boolValue":
            return item
        if kind == "intValue":
            try:
                return int(item)
            except (TypeError, ValueError):
                raise BadInput("wrong_type", "intValue is not an integer") from None
        if kind == "doubleValue":
            return item
        if kind == "arrayValue" and type(item) is dict:
            return [_otel_value(element, depth + 1) for element in _list(item.get("values"), "arrayValue")]
        if kind == "kvlistValue" and type(item) is dict:
            return _otel_attributes(item.get("values"), depth + 1)
    return None


def _list(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if type(value) is not list:
        raise BadInput("wrong_type", f"{field} is not a list")
    return value


def _otel_attributes(value: Any, depth: int = 0) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    for pair in _list(value, "attributes"):
        if type(pair) is not dict or type(pair.get("key")) is not str:
            raise BadInput("wrong_type", "attribute is not a {key, value} object")
        attributes[pair["key"]] = _otel_value(pair.get("value") or {}, depth)
    return attributes


def _object(value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if type(value) is not dict:
        raise BadInput("wrong_type", f"{field} is not an object")
    return value


def _decode_otel(doc: dict[str, Any], config: DecodeConfig, fallback: float) -> list[ErrorEvent]:
    events: list[ErrorEvent] = []
    for item in _list(doc.get("resourceLogs"), "resourceLogs"):
        resource_logs = _object(item, "resourceLogs[]")
        resource = _otel_attributes(_object(resource_logs.get("resource"), "resource").get("attributes"))
        scopes = resource_logs.get("scopeLogs") or resource_logs.get("instrumentationLibraryLogs")
        for scope_item in _list(scopes, "scopeLogs"):
            scope_logs = _object(scope_item, "scopeLogs[]")
            scope = _object(scope_logs.get("scope") or scope_logs.get("instrumentationLibrary"), "scope")
            logger = _text(scope.get("name"), "scope.name")
            for record in _list(scope_logs.get("logRecords"), "logRecords"):
                events.append(_otel_record(_object(record, "logRecords[]"), resource, logger, config, fallback))
    if not events:
        raise BadInput("no_error", "OTLP message without log records")
    return events


_OTEL_SEVERITY = ((21, "fatal"), (17, "error"), (13, "warn"), (9, "info"), (5, "debug"), (1, "trace"))


def _otel_record(
    record: dict[str, Any], resource: dict[str, Any], logger: str, config: DecodeConfig, fallback: float
) -> ErrorEvent:
    attributes = _otel_attributes(record.get("attributes"))
    trace = _text(attributes.get("exception.stacktrace"), "exception.stacktrace")
    chain = _text_chain(
        trace,
        _text(attributes.get("exception.type"), "exception.type"),
        _text(attributes.get("exception.message"), "exception.message"),
        config.max_frames,
    )
    extra = {key: value for key, value in attributes.items() if key not in _OTEL_CONSUMED}
    extra.update((f"resource.{k}", v) for k, v in resource.items() if k not in _OTEL_RESOURCE_CONSUMED)
    body = _otel_value(record["body"]) if record.get("body") else None
    if body is not None and type(body) is not str:
        extra["body"] = body
    commit_fields = (config.commit_field,) if config.commit_field else _OTEL_COMMIT_ATTRIBUTES
    commit = next((v for f in commit_fields for v in (attributes.get(f), resource.get(f)) if v), None)
    severity = _text(record.get("severityText"), "severityText").lower()
    number = record.get("severityNumber")
    if not severity and type(number) is int:
        severity = next((name for floor, name in _OTEL_SEVERITY if number >= floor), "")
    for field in ("traceId", "spanId"):
        if record.get(field):
            extra[field] = record[field]
    timestamp = record.get("timeUnixNano") or None
    if timestamp in (None, "0", 0):
        timestamp = record.get("observedTimeUnixNano") or None
    server_id = _text(resource.get("service.name") or attributes.get("service.name"), "service.name")
    message = _require("otel", server_id, body if type(body) is str else "", chain)
    return ErrorEvent(
        server_id,
        fallback if timestamp in (None, "0", 0) else _timestamp(timestamp, fallback),
        message,
        severity or "error",
        logger,
        _identifier(commit, "commit") or None,
        _identifier(resource.get("tenant") or attributes.get("tenant"), "tenant") or "default",
        chain,
        trace,
        "otel",
        extra,
    )
