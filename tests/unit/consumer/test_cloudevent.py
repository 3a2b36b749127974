"""The analysis event: CloudEvents 1.0 structured JSON, valid against the committed JSON Schema."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import jsonschema
import orjson
import pytest

from analysis.report import Analysis, Citation, ClusterInfo, Location
from consumer.cloudevent import EVENT_TYPE, SCHEMA_PATH, event_schema, to_cloudevent


def _analysis(**overrides: object) -> Analysis:
    fields: dict[str, object] = {
        "analysis_id": "3f1c2b7e-0000-5000-8000-000000000001",
        "status": "heuristic",
        "analyzer": "heuristic",
        "cluster": ClusterInfo(server="checkout", tenant="default", fingerprint="ab12",
                               exception_type="KeyError", first_seen=1.0, last_seen=2.0, count=3,
                               sample_messages=["boom"]),
        "commit": "a" * 40,
        "culprit": Location(path="shop/cart.py", line=12, function="total"),
        "citations": [Citation(path="shop/cart.py", start_line=10, end_line=14, commit="a" * 40,
                               blob_sha="b" * 40)],
    }
    fields.update(overrides)
    return Analysis.model_validate(fields)


class TestCloudEvent:
    def test_committed_schema_is_the_generated_one(self) -> None:
        """The schema file other teams read matches the code (`python -m consumer.cloudevent` rewrites it)."""
        assert json.loads(SCHEMA_PATH.read_text(encoding="utf-8")) == event_schema()

    def test_event_envelope_follows_cloudevents_structured_mode(self) -> None:
        """The envelope carries the analysis id, the server as subject, and the analysis as data."""
        analysis = _analysis()
        event = orjson.loads(to_cloudevent(analysis, "logagent/test", now=datetime(2024, 5, 1, tzinfo=UTC)))
        assert event["specversion"] == "1.0"
        assert event["type"] == EVENT_TYPE
        assert event["id"] == analysis.analysis_id
        assert event["subject"] == "checkout"
        assert event["source"] == "logagent/test"
        assert event["time"] == "2024-05-01T00:00:00.000Z"
        assert event["datacontenttype"] == "application/json"
        assert Analysis.model_validate(event["data"]) == analysis

    @pytest.mark.parametrize("status", ["analyzed", "recurrence", "heuristic", "failed"])
    def test_events_of_every_status_validate_against_the_schema(self, status: str) -> None:
        """Every status the service publishes yields a schema-valid event."""
        extra = {"failure_reason": "RepoError: no repository"} if status == "failed" else {}
        event = orjson.loads(to_cloudevent(_analysis(status=status, **extra), "logagent/test"))
        validator = jsonschema.Draft202012Validator(event_schema(), format_checker=jsonschema.FormatChecker())
        validator.validate(event)

    def test_schema_rejects_a_broken_event(self) -> None:
        """The schema is strict enough to catch a missing field or an unknown status."""
        validator = jsonschema.Draft202012Validator(event_schema())
        event = orjson.loads(to_cloudevent(_analysis(), "logagent/test"))
        del event["subject"]
        assert not validator.is_valid(event)
        event = orjson.loads(to_cloudevent(_analysis(), "logagent/test"))
        event["data"]["status"] = "guessed"
        assert not validator.is_valid(event)
