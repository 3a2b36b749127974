"""Kafka message bytes → `ErrorEvent`s, whatever mix of the four conventions' fields a message uses.

The design names four input shapes (native, Elastic Common Schema, OpenTelemetry OTLP/JSON,
logstash-logback-encoder), but producers mix them: a logback document with a nested custom `service`
object, a native event with a text `stack_trace`. So every field is read from the first of its known
spellings across all four (`SPELLINGS`, the table in the README's Input section), whatever shape the
message looks like; an explicit `server_id` always wins. OTLP batches (`resourceLogs`) are unpacked in
`analysis.intake.otlp` and read the same way. `shape` only labels which convention a message resembles.

Anything that can never become an event raises `BadInput` with one bounded reason code, so the consumer
can route it to the DLQ. Decoding is the hot path: no pydantic, no regex per event, a field costs one
type check, and the spellings present in a message layout are looked up once per layout.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from analysis.cache import OBJECT_BYTES, BoundedCache
from analysis.errors import BadInput
from analysis.event import ErrorEvent, ExceptionInfo, Shape, new_event
from analysis.intake.field import (
    MAX_ID_CHARS,
    declared_chain,
    get_path,
    identifier,
    level,
    require,
    tenant,
    text,
    timestamp,
    trace_chain,
)
from analysis.intake.otlp import decode_otlp
from analysis.intake.structured import structured_chain

Chain = tuple[ExceptionInfo, ...]

BAD_INPUT_REASONS = (
    "too_large", "invalid_utf8", "not_json", "not_object", "too_deep", "wrong_type", "no_error",
    "missing_server", "id_too_long", "tenant_mismatch",
)  # fmt: skip
"""Every reason `decode_message` can raise; the DLQ metric's `reason` label takes only these values."""

DEFAULT_SERVER_ID_FIELDS = ("service.name", "service", "app_name", "appName", "application", "HOSTNAME")
"""Where the server id is read when `server_id` is absent, in order (the `server_id_fields` setting)."""

SPELLINGS: dict[str, tuple[str, ...]] = {
    "timestamp": ("timestamp", "@timestamp"),
    "level": ("level", "log.level"),
    "logger": ("logger", "log.logger", "logger_name"),
    "message": ("message",),
    "exception_type": ("error.type", "exception.type"),
    "exception_value": ("error.message", "exception.message"),
    "trace": ("exception", "stack_trace", "error.stack_trace", "exception.stacktrace"),
    "commit": ("commit", "service.version"),
    "tenant": ("tenant", "organization.id", "labels.tenant"),
}
"""Each field's spellings across the conventions, first match wins (OTLP reads its attributes alike)."""

_WHOLLY_READ = frozenset({"error", "log"})  # read whole when they are objects, kept when they are not
_ECS_MARKERS = frozenset({"ecs.version", "ecs", "log.level", "log", "service.name", "error.stack_trace", "error",
                          "error.type"})  # fmt: skip
_LOGSTASH_MARKERS = frozenset({"logger_name", "stack_trace", "level_value", "@version", "thread_name"})
# Keyed by a document's key names, which the input chooses: charged for them (see _plan).
_PLANS: BoundedCache[tuple[str, ...], tuple[Any, ...]] = BoundedCache("decode.plans", 1024, 16 << 20)


class DecodeConfig(BaseModel):
    """Limits and field choices for decoding; composed into the service settings."""

    model_config = ConfigDict(frozen=True)

    max_message_bytes: int = Field(default=1 << 20, ge=1, description="Larger messages go to the DLQ.")
    max_depth: int = Field(default=64, ge=2, description="Deeper JSON nesting goes to the DLQ.")
    commit_field: str | None = Field(default=None, description="Dotted path of the deployed commit field.")
    max_frames: int = Field(default=2000, ge=1, description="Frames kept per exception, innermost first.")
    in_app_prefixes: tuple[str, ...] = Field(default=(), description="Module or path prefixes of own code.")
    server_id_fields: tuple[str, ...] = Field(
        default=DEFAULT_SERVER_ID_FIELDS, description="Fields naming the server after `server_id`, in order."
    )
    default_server_id: str = Field(default="", description="The server of an event that names none.")
    tenant: str = Field(default="", description="The one tenant of this deployment: an event naming none is "
                        "its, one naming another is refused (`tenant_mismatch`); empty: the event's own.")


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
        return _checked(decode_otlp(doc, config, fallback), config)
    return [decode_record(doc, config, fallback)]


def decode_record(doc: dict[str, Any], config: DecodeConfig, fallback: float,
                  read: tuple[Chain, str, str] | None = None) -> ErrorEvent:
    """The event of a flat (not OTLP) record already parsed from JSON, as `decode_message` decodes it;
    `read` is the record's `record_chain`, when the caller has read it already."""
    return _checked([_decode_record(doc, config, fallback, read)], config)[0]


def _checked(events: list[ErrorEvent], config: DecodeConfig) -> list[ErrorEvent]:
    """`events`, unless a value they keep nests past `max_depth` (the event's extra is its level 1). Each
    value is walked once: the records of an OTLP batch share their resource's (a review: a resource's list
    of 100,000 items was walked again for each of 420 records, 1.3 s)."""
    walked: set[int] = set()
    for event in events:  # interpreted fields are type-checked; only the kept unknown ones can nest
        for value in event.extra.values():
            if (type(value) is dict or type(value) is list) and id(value) not in walked:
                walked.add(id(value))
                if _too_deep(value, config.max_depth - 1):
                    raise BadInput("too_deep", f"nesting over {config.max_depth}")
    return events


def _plan(doc: dict[str, Any], config: DecodeConfig) -> tuple[Any, ...]:
    """What to read in this layout of keys, computed once per layout.

    Per field (`SPELLINGS` order, then the server): None when no spelling can be present, the key when
    exactly one key that cannot also be nested is, else the spellings to try in order. Then the keys
    left out of `extra`, the objects read whole when they are objects, the shape, and the server fields
    the plan was made for.
    """
    layout = tuple(doc)
    plan = _PLANS.get(layout)
    if plan is None or plan[-1] is not config.server_id_fields:  # one plan per layout and server fields
        keys = set(doc)
        specs: list[Any] = []
        for names in (*SPELLINGS.values(), ("server_id", *config.server_id_fields)):
            present = tuple(name for name in names if name in keys or name.partition(".")[0] in keys)
            # One spelling, flat: a plain `get`. A dotted key may also be nested, unless its parent is absent.
            single = len(present) == 1 and present[0] in keys and present[0].partition(".")[0] not in keys
            specs.append(None if not present else present[0] if single else present)
        consumed = frozenset(name for names in SPELLINGS.values() for name in names if name in keys) | {
            "exception", "server_id"}
        plan = (*specs, consumed - _WHOLLY_READ, tuple(_WHOLLY_READ & keys), _shape(doc), config.server_id_fields)
        _PLANS.put(layout, plan, OBJECT_BYTES * (2 + len(layout)) + sum(map(sys.getsizeof, layout)))
    return plan


def layout_plan(doc: dict[str, Any], config: DecodeConfig) -> tuple[Any, ...]:
    """What decoding reads in `doc`'s layout of keys (see `_plan`), shared with `analysis.intake.quick_key`."""
    plan = _PLANS.get(tuple(doc))
    return plan if plan is not None and plan[-1] is config.server_id_fields else _plan(doc, config)


def record_chain(doc: dict[str, Any], plan: tuple[Any, ...], max_frames: int) -> tuple[Chain, str, str]:
    """(chain, raw trace, message) of a flat record as decoding reads them: a structured exception with frames,
    else the first trace field that holds a trace, else a trace logged as the message itself, else one
    exception declared without frames (a structured one, else `field.declared_chain`'s). A trace found is read
    whole: declared type and message fields add nothing to it."""
    traces, types, values = plan[6], plan[4], plan[5]
    message = doc.get("message") if plan[3] is not None else None
    if type(message) is not str:
        message = text(message, "message")
    structured: Chain = ()
    texts: list[str] = []
    for name in (traces,) if type(traces) is str else traces or ():
        trace = doc.get(name)
        if trace is None and "." in name and not name.startswith("exception."):  # not inside a native object,
            trace = get_path(doc, name)  # whose `stacktrace` is its structured frames
        if type(trace) is str:
            texts.append(trace)
        elif type(trace) is dict and name == "exception":
            structured = structured_chain(trace, max_frames)
            if any(exception.frames for exception in structured):
                return structured, "", message
        elif trace is not None:
            texts.append(text(trace, name))
    if not texts and not structured and types is None and values is None and "\n" not in message:
        return (), "", message  # a message alone, the usual record without a trace: nothing more to read
    chain, raw_trace = trace_chain(texts, message, max_frames)
    # Checked even when a trace is found, as every field decoding reads is.
    kind = "" if types is None else text(_first(doc, types)[1], "exception type")
    value = "" if values is None else text(_first(doc, values)[1], "exception message")
    return chain or structured or declared_chain(kind, value, raw_trace), raw_trace, message


def field_value(doc: dict[str, Any], spec: str | tuple[str, ...] | None) -> Any:
    """The value decoding reads for one field of a layout plan (`layout_plan`), before its type check."""
    return _first(doc, spec)[1]


def _first(doc: dict[str, Any], spec: str | tuple[str, ...] | None, absent: Any = None) -> tuple[str, Any]:
    """(spelling, value) of the first spelling that holds a value other than `absent`; ("", None) when none
    does."""
    if spec is None:
        return "", None
    if type(spec) is str:
        return spec, doc.get(spec)
    for name in spec:
        value = doc.get(name)
        if value is None and "." in name:
            value = get_path(doc, name)
        if value is not None and value != absent:
            return name, value
    return "", None


def server_id_of(doc: dict[str, Any], spec: str | tuple[str, ...] | None) -> tuple[str, str]:
    """(spelling, server id) of the first spelling holding a non-empty string; a custom object in one
    of the fields (`"service": {...}`) is not a name."""
    for name in (spec,) if type(spec) is str else spec or ():
        value = doc.get(name)
        if value is None and "." in name:
            value = get_path(doc, name)
        if type(value) is str and value:
            return name, value
        if name == "server_id" and value is not None and type(value) is not str:
            raise BadInput("wrong_type", f"server_id is {type(value).__name__}, expected string")
    return "", ""


def _decode_record(doc: dict[str, Any], config: DecodeConfig, fallback: float,
                   read: tuple[Chain, str, str] | None = None) -> ErrorEvent:
    plan = _PLANS.get(tuple(doc))
    if plan is None or plan[-1] is not config.server_id_fields:
        plan = _plan(doc, config)
    times, levels, loggers, commits, tenants, servers, consumed, wholly, shape = (*plan[:3], *plan[7:13],)
    get = doc.get
    chain, raw_trace, message = read if read is not None else record_chain(doc, plan, config.max_frames)
    server_id = get(servers) if type(servers) is str else None
    if type(server_id) is str and server_id:
        server_field = servers
    else:
        server_field, server_id = server_id_of(doc, servers)
    if not server_id:
        server_id = config.default_server_id
    if not message or not server_id or len(server_id) > MAX_ID_CHARS:
        message = require(shape, server_id, message, chain)
    if config.commit_field:
        commit = get_path(doc, config.commit_field)
    else:
        # An empty `commit` names none: `service.version` beside it still does.
        commit = get(commits) if type(commits) is str else None if commits is None else _first(doc, commits, "")[1]
    logger = get(loggers) if type(loggers) is str else None if loggers is None else _first(doc, loggers)[1]
    if type(logger) is not str:
        logger = text(logger, "logger")
    extra = {key: value for key, value in doc.items() if key not in consumed}
    if server_field not in consumed and server_field in extra:
        del extra[server_field]
    for key in wholly:
        if type(extra.get(key)) is dict:
            del extra[key]
    return new_event(
        server_id,
        timestamp(get(times) if type(times) is str else None if times is None else _first(doc, times)[1], fallback),
        message,
        level(get(levels) if type(levels) is str else None if levels is None else _first(doc, levels)[1], "level"),
        logger,
        identifier(commit, "commit") or None,
        tenant(get(tenants) if type(tenants) is str else None if tenants is None else _first(doc, tenants)[1],
               config.tenant),
        chain,
        raw_trace,
        shape,
        extra,
    )


def _shape(doc: dict[str, Any]) -> Shape:
    """Which convention the message resembles most; decoding does not depend on it."""
    if "server_id" not in doc:
        if not _ECS_MARKERS.isdisjoint(doc) or type(doc.get("service")) is dict:
            return "ecs"
        if not _LOGSTASH_MARKERS.isdisjoint(doc) or "@timestamp" in doc:
            return "logstash"
    return "native"


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

