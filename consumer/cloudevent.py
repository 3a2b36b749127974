"""The published analysis event: CloudEvents 1.0 in structured JSON mode, and its JSON Schema.

`id` is the analysis id, deterministic from server, signature and burst start, so a replayed burst
yields the same id and consumers can deduplicate on it. The contract grows without breaking anyone:
consumers ignore fields they do not know, so the schema admits CloudEvents extension attributes on the
envelope and new optional fields in `data`; `type` stays `logagent.analysis.v1` until a field changes
meaning or goes away. `dataschema` names the schema, and `traceparent` (W3C Trace Context, the
CloudEvents distributed-tracing extension) links the event to the trace of the input that caused it.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from analysis.event import ErrorEvent
from analysis.report import Analysis

__all__ = ["DATASCHEMA", "EVENT_TYPE", "SCHEMA_PATH", "event_schema", "to_cloudevent", "traceparent_of",
           "write_schema"]

EVENT_TYPE = "logagent.analysis.v1"
SCHEMA_PATH = Path(__file__).parent / "schema" / "analysis-event.v1.json"
_SCHEMA_ID = "urn:logagent:schema:analysis-event:v1"
DATASCHEMA = f"{_SCHEMA_ID}#/properties/data"
"""The `dataschema` attribute: the part of the shipped schema that `data` follows."""

_TRACEPARENT = re.compile(r"^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$")
_TRACE_ID = re.compile(r"^(?!0{32})[0-9a-f]{32}$")
_SPAN_ID = re.compile(r"^(?!0{16})[0-9a-f]{16}$")
# Where the input shapes carry a trace context: W3C, OpenTelemetry (OTLP/JSON), ECS, logback MDC.
_TRACE_KEYS = ("traceId", "trace.id", "trace_id", "traceid")
_SPAN_KEYS = ("spanId", "span.id", "span_id", "spanid")
_DATA_NOTE = ("Consumers ignore fields they do not know: new optional fields may appear in any v1 event; a "
              "field that changes meaning or goes away comes with a new event type.")


def to_cloudevent(analysis: Analysis, source: str, now: datetime | None = None,
                  traceparent: str | None = None) -> bytes:
    """Serialise `analysis` as a structured-mode CloudEvent (UTF-8 JSON bytes)."""
    time = (now or datetime.now(UTC)).astimezone(UTC)
    envelope = {
        "specversion": "1.0",
        "id": analysis.analysis_id,
        "source": source,
        "type": EVENT_TYPE,
        "subject": analysis.cluster.server,
        "time": time.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "datacontenttype": "application/json",
        "dataschema": DATASCHEMA,
        "data": analysis.model_dump(mode="json"),
    }
    if traceparent is not None:
        envelope["traceparent"] = traceparent
    return orjson.dumps(envelope)


def traceparent_of(event: ErrorEvent, analysis_id: str) -> str | None:
    """A W3C `traceparent` continuing the trace the input event carried, or None when it carried none.

    A full `traceparent` is passed on as it is. A trace id alone (OpenTelemetry, ECS, MDC fields) gets a
    span id derived from the analysis id when it has none, so a replayed burst yields the same header, and
    flags 00: nothing says the trace was sampled.
    """
    extra = event.extra
    given = extra.get("traceparent")
    if isinstance(given, str) and _TRACEPARENT.match(given.strip().lower()):
        return given.strip().lower()
    trace_id = _first_id(extra, _TRACE_KEYS, _TRACE_ID)
    if trace_id is None:
        return None
    span_id = _first_id(extra, _SPAN_KEYS, _SPAN_ID) or hashlib.sha256(analysis_id.encode()).hexdigest()[:16]
    return f"00-{trace_id}-{span_id}-00"


def _first_id(extra: Any, keys: tuple[str, ...], shape: re.Pattern[str]) -> str | None:
    for key in keys:
        value = extra.get(key)
        if value is None and "." in key:  # ECS nests: {"trace": {"id": ...}}
            parent, child = key.split(".", 1)
            nested = extra.get(parent)
            value = nested.get(child) if isinstance(nested, dict) else None
        if isinstance(value, str) and shape.match(value.strip().lower()):
            return value.strip().lower()
    return None


def event_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the whole event: the envelope, and `data` from `Analysis`."""
    data = _open(Analysis.model_json_schema(mode="serialization"))
    data["description"] = f"{data.get('description', '')} {_DATA_NOTE}".strip()
    # The model's definitions move to the root so their "#/$defs/..." references still resolve.
    defs = data.pop("$defs", {})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": _SCHEMA_ID,
        "title": "Log Agent analysis event",
        "description": "A CloudEvents 1.0 structured-mode event carrying one burst's analysis. Extension "
                       "attributes (lower-case letters and digits, scalar values) may be present.",
        "type": "object",
        "required": ["specversion", "id", "source", "type", "subject", "time", "datacontenttype", "dataschema",
                     "data"],
        "properties": {
            "specversion": {"const": "1.0"},
            "id": {"type": "string", "minLength": 1, "description": "The analysis id."},
            "source": {"type": "string", "minLength": 1, "format": "uri-reference"},
            "type": {"const": EVENT_TYPE},
            "subject": {"type": "string", "minLength": 1, "description": "The server id."},
            "time": {"type": "string", "format": "date-time"},
            "datacontenttype": {"const": "application/json"},
            "dataschema": {"type": "string", "format": "uri"},
            "traceparent": {"type": "string", "pattern": _TRACEPARENT.pattern,
                            "description": "W3C Trace Context of the input that caused the analysis."},
            "tracestate": {"type": "string"},
            "data": data,
        },
        # CloudEvents extension attributes: names of lower-case letters and digits, scalar values.
        "propertyNames": {"pattern": "^[a-z0-9]+$"},
        "additionalProperties": {"type": ["string", "integer", "number", "boolean"]},
        "$defs": {name: _open(schema) for name, schema in defs.items()},
    }


def _open(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` without `additionalProperties: false` anywhere: unknown fields are for consumers to ignore
    (the model that produces the event still refuses them)."""
    opened: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "additionalProperties" and value is False:
            continue
        if isinstance(value, dict):
            opened[key] = _open(value)
        elif isinstance(value, list):
            opened[key] = [_open(item) if isinstance(item, dict) else item for item in value]
        else:
            opened[key] = value
    return opened


def write_schema(path: Path = SCHEMA_PATH) -> None:
    """Write `event_schema()` to `path`, the committed copy other teams read."""
    path.write_text(json.dumps(event_schema(), indent=2, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write_schema()
