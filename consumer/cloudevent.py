"""The published analysis event: CloudEvents 1.0 in structured JSON mode, and its JSON Schema.

`id` is the analysis id, deterministic from server, signature and burst start, so a replayed burst
yields the same id and consumers can deduplicate on it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from analysis.report import Analysis

__all__ = ["EVENT_TYPE", "SCHEMA_PATH", "event_schema", "to_cloudevent", "write_schema"]

EVENT_TYPE = "logagent.analysis.v1"
SCHEMA_PATH = Path(__file__).parent / "schema" / "analysis-event.v1.json"
_SCHEMA_ID = "urn:logagent:schema:analysis-event:v1"


def to_cloudevent(analysis: Analysis, source: str, now: datetime | None = None) -> bytes:
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
        "data": analysis.model_dump(mode="json"),
    }
    return orjson.dumps(envelope)


def event_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the whole event: the envelope, and `data` from `Analysis`."""
    data = Analysis.model_json_schema(mode="serialization")
    # The model's definitions move to the root so their "#/$defs/..." references still resolve.
    defs = data.pop("$defs", {})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": _SCHEMA_ID,
        "title": "Log Agent analysis event",
        "description": "A CloudEvents 1.0 structured-mode event carrying one burst's analysis.",
        "type": "object",
        "required": ["specversion", "id", "source", "type", "subject", "time", "datacontenttype", "data"],
        "properties": {
            "specversion": {"const": "1.0"},
            "id": {"type": "string", "minLength": 1, "description": "The analysis id."},
            "source": {"type": "string", "minLength": 1, "format": "uri-reference"},
            "type": {"const": EVENT_TYPE},
            "subject": {"type": "string", "minLength": 1, "description": "The server id."},
            "time": {"type": "string", "format": "date-time"},
            "datacontenttype": {"const": "application/json"},
            "data": data,
        },
        "additionalProperties": False,
        "$defs": defs,
    }


def write_schema(path: Path = SCHEMA_PATH) -> None:
    """Write `event_schema()` to `path`, the committed copy other teams read."""
    path.write_text(json.dumps(event_schema(), indent=2, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write_schema()
