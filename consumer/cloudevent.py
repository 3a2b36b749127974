"""The published analysis event: CloudEvents 1.0 in structured JSON mode, and its JSON Schema.

`id` is the analysis id, deterministic from server, signature and burst start, so a replayed burst
yields the same id and consumers can deduplicate on it. The contract grows without breaking anyone:
consumers ignore fields they do not know, so the schema admits CloudEvents extension attributes on the
envelope and new optional fields in `data`; `type` stays `logagent.analysis.v1` until a field changes
meaning or goes away. `dataschema` names the schema, and `traceparent` (W3C Trace Context, the
CloudEvents distributed-tracing extension) links the event to the trace of the input that caused it.

An event over the output topic's record limit (a model can answer megabytes) is cut to fit, the same
way every time (`fitting_events`, `CUT_STEPS`): each text to a number of characters and each list to a
number of items, in steps until it fits. Ids, paths, commits and numbers are never cut; a fix's code
(`before`, `after`) is kept whole or dropped, since half a fix reads as a fix. A cut event says so in
`notes` and asks for a review.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from analysis.event import ErrorEvent
from analysis.report import Analysis

__all__ = ["CUT_STEPS", "DATASCHEMA", "EVENT_TYPE", "SCHEMA_PATH", "cut_analysis", "event_schema", "fitting_events",
           "to_cloudevent", "traceparent_of", "write_schema"]

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


CUT_STEPS = ((4096, 20), (512, 5), (128, 1))
"""How an event over the record limit is cut, one step after the other until it fits: (characters kept of
each text, items kept of each list)."""
# Never cut: what identifies the burst, the code and the memory (a cut path or sha would point elsewhere).
_WHOLE = frozenset({"analysis_id", "status", "analyzer", "server", "tenant", "fingerprint", "commit", "path",
                    "memory_id", "sha", "blob_sha", "recurrence_of"})
_CODE = frozenset({"before", "after"})  # a fix's code


def fitting_events(analysis: Analysis, source: str, max_bytes: int, size: Callable[[bytes], int] = len,
                   traceparent: str | None = None) -> Iterator[tuple[Analysis, bytes]]:
    """The event of `analysis`, then of each cut of it (`CUT_STEPS`), each only if its `size` (the record
    it makes) is within `max_bytes`: a publisher sends the first and, when the broker refuses one as too
    large, the next. A cut is made only when the one before did not do."""
    now = datetime.now(UTC)
    cuts = (cut_analysis(analysis, chars, items, max_bytes) for chars, items in CUT_STEPS)  # made when reached
    for form in itertools.chain((analysis,), cuts):
        value = to_cloudevent(form, source, now, traceparent)
        if size(value) <= max_bytes:
            yield form, value


def cut_analysis(analysis: Analysis, max_chars: int, max_items: int, max_bytes: int) -> Analysis:
    """`analysis` with each text cut to `max_chars` characters and each list to `max_items` items (module
    doc), flagged for review with a note saying so."""
    data = _cut(analysis.model_dump(mode="json"), max_chars, max_items)
    note = (f"event cut to fit the record limit of {max_bytes} bytes: texts to {max_chars} characters, lists "
            f"to {max_items} items")
    data.update(needs_review=True, notes=[*data["notes"], note],
                review_reasons=[*data["review_reasons"], "event cut to fit the record limit"])
    return Analysis.model_validate(data)


def _cut(value: Any, max_chars: int, max_items: int, key: str = "") -> Any:
    if isinstance(value, str):
        return value if len(value) <= max_chars or key in _WHOLE else value[: max_chars - 1] + "…"
    if isinstance(value, list):
        return [_cut(item, max_chars, max_items, key) for item in value[:max_items]]
    if not isinstance(value, dict):
        return value
    cut = {name: item if name in _CODE else _cut(item, max_chars, max_items, name) for name, item in value.items()}
    if any(len(value[name]) > max_chars for name in _CODE & value.keys()):
        cut.update(dict.fromkeys(_CODE, ""))  # a fix's code goes whole or not at all
    return cut


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
