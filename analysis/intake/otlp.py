"""OpenTelemetry log records (OTLP/JSON as the Collector's Kafka exporter writes them) → `ErrorEvent`s.

One message is `resourceLogs → scopeLogs → logRecords` and may carry many records; attributes are
`{key, value: AnyValue}` lists. The exception comes from the `exception.*` semantic-convention attributes,
else from attributes named as the other conventions name those fields (`error.type`, `stack_trace`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from analysis.errors import BadInput
from analysis.event import ErrorEvent, new_event
from analysis.intake.field import declared_chain, identifier, require, tenant, text, timestamp, trace_chain

if TYPE_CHECKING:
    from analysis.intake.decode import DecodeConfig

_COMMIT_ATTRIBUTES = (
    "vcs.ref.head.revision", "vcs.revision", "git.commit.sha", "deployment.commit", "commit",
    "service.version",
)  # fmt: skip
# The exception and tenant attributes, each read from the first of its spellings that holds a value: the
# semantic conventions' first, then the other conventions' field names (a Collector that maps ECS or
# logstash fields to attributes keeps their names).
TRACE_ATTRIBUTES = ("exception.stacktrace", "error.stack_trace", "stack_trace")
TYPE_ATTRIBUTES = ("exception.type", "error.type")
MESSAGE_ATTRIBUTES = ("exception.message", "error.message")
_TENANT_ATTRIBUTES = ("tenant", "organization.id", "labels.tenant")
_CONSUMED = frozenset({*TRACE_ATTRIBUTES, *TYPE_ATTRIBUTES, *MESSAGE_ATTRIBUTES, "server_id"})
_RESOURCE_CONSUMED = frozenset({"service.name", *_TENANT_ATTRIBUTES, "server_id"})
_SEVERITY = ((21, "fatal"), (17, "error"), (13, "warn"), (9, "info"), (5, "debug"), (1, "trace"))
_MAX_DEPTH = 64
# Each record carries its resource's attributes: what decoding a batch copies is its records times its
# resource's weight, the resource's JSON and `ENTRY_BYTES` an attribute (a dict entry in each record, ~26
# bytes, its name shared; an attribute with no value is 14 bytes of JSON). A real batch weighs tens of MB
# (8,192 records under a 4 kB resource of 40 attributes: 44 MB); hostile ones of 471 kB (8,000 attributes
# over 8,000 records) took 5.5 GB and 27 s, of 173 kB (4,500 attributes without values over 2,000 records)
# 811 MB and 3 s. Under the bound the most a message holds is ~2.9 million entries, ~80 MB.
MAX_RESOURCE_COPIES = 128 << 20
ENTRY_BYTES = 32


def copies_bound(weight: int, records: int, copied: int) -> int:
    """`copied` plus `records` copies of a resource of `weight` (`ENTRY_BYTES` an attribute and its JSON's
    length); raises BadInput past `MAX_RESOURCE_COPIES`."""
    copied += weight * records
    if copied > MAX_RESOURCE_COPIES:
        raise BadInput("too_large", f"OTLP batch copies its resource into each record: over "
                                    f"{MAX_RESOURCE_COPIES >> 20} MB ({records} records under a resource "
                                    f"weighing {weight} bytes)")
    return copied


def decode_otlp(doc: dict[str, Any], config: DecodeConfig, fallback: float) -> list[ErrorEvent]:
    """Every log record of an OTLP/JSON export request, in order; `fallback` stands in for a missing time."""
    events: list[ErrorEvent] = []
    copied = 0
    for item in _list(doc.get("resourceLogs"), "resourceLogs"):
        resource_logs = _object(item, "resourceLogs[]")
        resource_doc = _object(resource_logs.get("resource"), "resource")
        resource = attributes_of(resource_doc.get("attributes"))
        carried = {f"resource.{k}": v for k, v in resource.items() if k not in _RESOURCE_CONSUMED}  # in each record
        weight = len(orjson.dumps(resource_doc)) + ENTRY_BYTES * len(carried)
        scopes = resource_logs.get("scopeLogs") or resource_logs.get("instrumentationLibraryLogs")
        for scope_item in _list(scopes, "scopeLogs"):
            scope_logs = _object(scope_item, "scopeLogs[]")
            scope = _object(scope_logs.get("scope") or scope_logs.get("instrumentationLibrary"), "scope")
            logger = text(scope.get("name"), "scope.name")
            records = _list(scope_logs.get("logRecords"), "logRecords")
            copied = copies_bound(weight, len(records), copied)
            for record in records:
                record = _object(record, "logRecords[]")
                events.append(_record(record, resource, carried, logger, config, fallback))
    if not events:
        raise BadInput("no_error", "OTLP message without log records")
    return events


def any_value(value: Any, depth: int = 0) -> Any:
    """An OTLP AnyValue ({stringValue: …}, {intValue: "3"}, arrays, kvlists) as a plain value."""
    if type(value) is not dict or depth > _MAX_DEPTH:
        raise BadInput("too_deep" if depth > _MAX_DEPTH else "wrong_type", "attribute value is not an AnyValue")
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
            return [any_value(element, depth + 1) for element in _list(item.get("values"), "arrayValue")]
        if kind == "kvlistValue" and type(item) is dict:
            return attributes_of(item.get("values"), depth + 1)
    return None


def attributes_of(value: Any, depth: int = 0) -> dict[str, Any]:
    """A `[{key, value}]` attribute list as a dict of plain values."""
    attributes: dict[str, Any] = {}
    for pair in _list(value, "attributes"):
        if type(pair) is not dict or type(key := pair.get("key")) is not str:
            raise BadInput("wrong_type", "attribute is not a {key, value} object")
        item = pair.get("value") or {}
        if type(item) is dict and len(item) == 1 and "stringValue" in item and depth <= _MAX_DEPTH:
            attributes[key] = item["stringValue"]
        else:
            attributes[key] = any_value(item, depth)
    return attributes


def _list(value: Any, field: str) -> list[Any]:
    if type(value) is list:
        return value
    if value is None:
        return []
    raise BadInput("wrong_type", f"{field} is not a list")


def _object(value: Any, field: str) -> dict[str, Any]:
    if type(value) is dict:
        return value
    if value is None:
        return {}
    raise BadInput("wrong_type", f"{field} is not an object")


def _record(record: dict[str, Any], resource: dict[str, Any], carried: dict[str, Any], logger: str,
            config: DecodeConfig, fallback: float) -> ErrorEvent:
    attributes = attributes_of(record.get("attributes"))
    traces = [text(attributes.get(name), name) for name in TRACE_ATTRIBUTES]
    declared_type = first_text(attributes, TYPE_ATTRIBUTES)
    declared_message = first_text(attributes, MESSAGE_ATTRIBUTES)
    extra = {key: value for key, value in attributes.items() if key not in _CONSUMED}
    extra.update(carried)
    body = any_value(record["body"]) if record.get("body") else None
    if body is not None and type(body) is not str:
        extra["body"] = body
    message = body if type(body) is str else ""
    # As a flat record's (`decode.record_chain`): the trace, else one logged as the body itself, else declared.
    chain, trace = trace_chain(traces, message, config.max_frames)
    chain = chain or declared_chain(declared_type, declared_message, trace)
    commit_fields = (config.commit_field,) if config.commit_field else _COMMIT_ATTRIBUTES
    commit = next((v for f in commit_fields for v in (attributes.get(f), resource.get(f)) if v), None)
    severity = text(record.get("severityText"), "severityText").lower()
    number = record.get("severityNumber")
    if not severity and type(number) is int:
        severity = next((name for floor, name in _SEVERITY if number >= floor), "")
    for field in ("traceId", "spanId"):
        if record.get(field):
            extra[field] = record[field]
    time = record.get("timeUnixNano") or None
    if time in (None, "0", 0):
        time = record.get("observedTimeUnixNano") or None
    server_id = _server_id(resource, attributes, config) or config.default_server_id
    message = require("otel", server_id, message, chain)
    return new_event(
        server_id,
        fallback if time in (None, "0", 0) else timestamp(time, fallback),
        message,
        severity or "error",
        logger,
        identifier(commit, "commit") or None,
        tenant(next((v for source in (resource, attributes) for name in _TENANT_ATTRIBUTES
                     if (v := source.get(name))), None), config.tenant),
        chain,
        trace,
        "otel",
        extra,
    )


def first_text(attributes: dict[str, Any], names: tuple[str, ...]) -> str:
    """The first of `names` that holds text; every one of them present must be text (or absent)."""
    values = [text(attributes.get(name), name) for name in names]
    return next((value for value in values if value), "")


def _server_id(resource: dict[str, Any], attributes: dict[str, Any], config: DecodeConfig) -> str:
    """An explicit `server_id` attribute, else the configured fields, resource attributes first."""
    for name in ("server_id", *config.server_id_fields):
        for source in (resource, attributes):
            value = source.get(name)
            if type(value) is str and value:
                return value
            if name == "server_id" and value is not None:
                raise BadInput("wrong_type", f"server_id is {type(value).__name__}, expected string")
    return ""
