"""The analysis event: CloudEvents 1.0 structured JSON, valid against the committed JSON Schema."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import jsonschema
import orjson
import pytest

from analysis.event import ErrorEvent
from analysis.report import Analysis, Citation, ClusterInfo, Fix, Location, Suspect
from consumer.cloudevent import (
    CUT_STEPS,
    DATASCHEMA,
    EVENT_TYPE,
    SCHEMA_PATH,
    event_schema,
    fitting_events,
    to_cloudevent,
    traceparent_of,
)

_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
_SPAN = "00f067aa0ba902b7"


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
        assert event["dataschema"] == DATASCHEMA
        assert "traceparent" not in event
        assert Analysis.model_validate(event["data"]) == analysis

    def test_the_type_stays_v1(self) -> None:
        """Growing the contract (extensions, optional fields) keeps the event type."""
        assert EVENT_TYPE == "logagent.analysis.v1"
        assert event_schema()["properties"]["type"] == {"const": "logagent.analysis.v1"}

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


def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(event_schema(), format_checker=jsonschema.FormatChecker())


class TestContractGrowth:
    def test_extension_attributes_and_unknown_data_fields_are_accepted(self) -> None:
        """What the CloudEvents SDK adds (partitionkey), a trace context, another producer's extension and a
        field a later v1 adds to data, at any depth, all validate: consumers ignore what they do not know."""
        event = orjson.loads(to_cloudevent(_analysis(), "logagent/test",
                                           traceparent=f"00-{_TRACE}-{_SPAN}-01"))
        event.update({"partitionkey": "checkout", "tracestate": "vendor=x", "sequence": 7, "urgent": True})
        event["data"]["blast_radius"] = {"services": 3}
        event["data"]["cluster"]["region"] = "eu-west-1"
        event["data"]["citations"][0]["url"] = "https://git.example.com/x"
        _validator().validate(event)
        assert "consumers ignore fields they do not know" in event_schema()["properties"]["data"]["description"].lower()

    def test_what_the_schema_still_refuses(self) -> None:
        """Extension names are lower-case letters and digits with scalar values; known fields keep their types."""
        base = orjson.loads(to_cloudevent(_analysis(), "logagent/test"))
        for broken in ({"Partition-Key": "x"}, {"nested": {"a": 1}}, {"traceparent": "not a trace"},
                       {"dataschema": 5}):
            assert not _validator().is_valid({**base, **broken}), broken
        wrong = json.loads(json.dumps(base))
        wrong["data"]["cluster"]["count"] = "many"
        assert not _validator().is_valid(wrong)


def _event(**extra: object) -> ErrorEvent:
    return ErrorEvent(server_id="checkout", timestamp=1.0, message="boom", extra=extra)


class TestTraceparent:
    @pytest.mark.parametrize(("extra", "expected"), [
        ({"traceparent": f"00-{_TRACE}-{_SPAN}-01"}, f"00-{_TRACE}-{_SPAN}-01"),
        ({"traceId": _TRACE, "spanId": _SPAN}, f"00-{_TRACE}-{_SPAN}-00"),
        ({"trace": {"id": _TRACE.upper()}, "span": {"id": _SPAN}}, f"00-{_TRACE}-{_SPAN}-00"),
        ({"trace.id": _TRACE, "span.id": _SPAN}, f"00-{_TRACE}-{_SPAN}-00"),
    ], ids=["w3c", "otlp", "ecs-nested", "ecs-dotted"])
    def test_the_input_trace_context_is_passed_on(self, extra: dict[str, object], expected: str) -> None:
        """A W3C traceparent goes on as it is; a trace and span id from OTLP or ECS fields become one."""
        assert traceparent_of(_event(**extra), "id-1") == expected

    def test_a_trace_id_alone_gets_a_stable_span_id(self) -> None:
        """Without a span id one is derived from the analysis id: a replayed burst carries the same header."""
        first = traceparent_of(_event(trace_id=_TRACE), "id-1")
        assert first is not None and first == traceparent_of(_event(trace_id=_TRACE), "id-1")
        assert first.startswith(f"00-{_TRACE}-") and first != traceparent_of(_event(trace_id=_TRACE), "id-2")

    @pytest.mark.parametrize("extra", [{}, {"trace_id": "0" * 32}, {"traceId": "xyz"},
                                       {"traceparent": f"00-{_TRACE}-{'0' * 16}-01"}])
    def test_no_or_invalid_trace_context_gives_none(self, extra: dict[str, object]) -> None:
        """Nothing is invented: all-zero or malformed ids are no trace context."""
        assert traceparent_of(_event(**extra), "id-1") is None


def _huge(**overrides: object) -> Analysis:
    """A model's answer of megabytes (attacker review: its event went over the record limit, and the publish
    failed on every replay)."""
    return _analysis(**{
        "status": "analyzed", "analyzer": "llm", "root_cause": "why " * 400_000,
        "fix": Fix(path="shop/cart.py", before="x = 1", after="y" * 500_000, explanation="because " * 1000),
        "suspects": [Suspect(path="shop/cart.py", line=n + 1, function="f" * 9000, reason="r" * 9000)
                     for n in range(50)],
        "notes": [f"note {n}" for n in range(100)], **overrides})


class TestFittingEvents:
    def test_an_event_that_fits_is_offered_whole_first(self) -> None:
        """The usual event: the analysis itself, as `to_cloudevent` writes it, no note."""
        analysis = _analysis()
        form, value = next(fitting_events(analysis, "logagent/test", 1 << 20))
        assert form is analysis and Analysis.model_validate(orjson.loads(value)["data"]) == analysis

    def test_an_event_over_the_limit_is_cut_to_fit_and_says_so(self) -> None:
        """3.6 MB of answer under a 64 kB limit: the first event offered fits, is valid against the schema,
        keeps the burst's identity, paths and shas whole, drops the fix's code rather than cut it, and asks
        for a review with a note naming the limit."""
        analysis = _huge()
        form, value = next(fitting_events(analysis, "logagent/test", 65_536))
        assert len(value) <= 65_536
        _validator().validate(orjson.loads(value))
        assert form.analysis_id == analysis.analysis_id and form.cluster == analysis.cluster
        assert form.citations == analysis.citations and form.culprit == analysis.culprit
        assert form.fix is not None and (form.fix.path, form.fix.before, form.fix.after) == ("shop/cart.py", "", "")
        assert 0 < len(form.root_cause) <= 4096 and len(form.suspects) <= 20
        assert form.needs_review and "event cut to fit the record limit" in form.review_reasons
        assert form.notes[-1].startswith("event cut to fit the record limit of 65536 bytes: texts to ")

    def test_the_cuts_are_the_same_every_time_and_smaller_each_step(self) -> None:
        """A replay cuts the same way; each further form (for a broker whose limit is lower) is smaller."""
        first = [(form, len(value)) for form, value in fitting_events(_huge(), "logagent/test", 1 << 20)]
        again = [form for form, _ in fitting_events(_huge(), "logagent/test", 1 << 20)]
        assert [form for form, _ in first] == again and len(first) == len(CUT_STEPS)
        sizes = [size for _, size in first]
        assert sizes == sorted(sizes, reverse=True) and sizes[-1] < 8_000

    def test_no_form_when_even_the_smallest_cut_is_over_the_limit(self) -> None:
        """The caller then sends a DLQ record instead."""
        assert list(fitting_events(_huge(), "logagent/test", 1024)) == []

    def test_the_size_is_measured_as_the_caller_says(self) -> None:
        """The record's size (key and headers included) decides, not the value's alone."""
        analysis = _analysis(root_cause="why " * 2000)
        whole = len(to_cloudevent(analysis, "logagent/test"))
        assert next(fitting_events(analysis, "logagent/test", whole))[0] is analysis
        assert next(fitting_events(analysis, "logagent/test", whole, lambda value: len(value) + 100))[0].notes
