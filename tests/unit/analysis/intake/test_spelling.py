"""Every field is read from the first of its spellings, whatever mix of the four conventions a message uses."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
import pytest

from analysis.errors import BadInput
from analysis.event import ErrorEvent
from analysis.intake.decode import DEFAULT_SERVER_ID_FIELDS, DecodeConfig, decode_message
from analysis.intake.signature import fingerprint_event
from tests.paths import PROJECT_ROOT, TRACES

JAVA = (TRACES / "java_inventory.txt").read_text()
PYTHON = (TRACES / "python_pricing.txt").read_text()
# What the JVM prints for a fast-thrown NullPointerException (OmitStackTraceInFastThrow): its type line alone.
JAVA_FAST_THROW = (TRACES / "java_fast_throw.txt").read_text()
NOW = 1_700_000_000.0


def decode_one(document: dict[str, Any], config: DecodeConfig | None = None) -> ErrorEvent:
    (event,) = decode_message(orjson.dumps(document), config or DecodeConfig(), received_at=NOW)
    return event


class TestServerId:
    def test_explicit_server_id_wins_over_every_other_spelling(self) -> None:
        """`server_id` beats service.name, service, app_name and HOSTNAME wherever they stand."""
        event = decode_one({"server_id": "orders", "service.name": "ecs-name", "service": {"name": "nested"},
                            "app_name": "app", "HOSTNAME": "pod-1", "message": "m"})  # fmt: skip
        assert event.server_id == "orders"

    def test_a_custom_service_object_is_not_a_name_but_its_name_field_is(self) -> None:
        """A logback document with a nested custom `service` object keeps its name and its trace."""
        event = decode_one({"@timestamp": "2024-05-02T10:14:03Z", "logger_name": "c.a.Orders", "level": "ERROR",
                            "message": "failed", "stack_trace": JAVA, "service": {"name": "orders", "env": "prod"}})
        assert (event.server_id, event.logger, event.exception_type) == (
            "orders", "c.a.Orders", "java.lang.IllegalStateException")
        assert event.exceptions[-1].frames and event.raw_trace == JAVA
        assert event.extra == {"service": {"name": "orders", "env": "prod"}}

    def test_the_field_list_is_a_setting_read_in_order(self) -> None:
        """The configured fields are tried in their order; the first non-empty string is the server."""
        document = {"message": "m", "app": "from-app", "team": {"service": "x"}, "cluster": "from-cluster"}
        assert decode_one(document, DecodeConfig(server_id_fields=("team.service", "cluster"))).server_id == "x"
        assert decode_one(document, DecodeConfig(server_id_fields=("nope", "cluster", "app"))).server_id == (
            "from-cluster")
        with pytest.raises(BadInput, match="missing_server"):
            decode_one(document)

    def test_a_default_server_stands_in_when_none_is_named(self) -> None:
        """`logagent analyze` decodes with the repository's name as the default server."""
        assert decode_one({"message": "m"}, DecodeConfig(default_server_id="repo")).server_id == "repo"
        assert decode_one({"message": "m", "app_name": "a"}, DecodeConfig(default_server_id="repo")).server_id == "a"

    def test_default_fields_are_the_documented_ones(self) -> None:
        """The README's Input table names the same default list as the decoder."""
        assert DEFAULT_SERVER_ID_FIELDS == ("service.name", "service", "app_name", "appName", "application", "HOSTNAME")


class TestTraceWhereverItStands:
    @pytest.mark.parametrize("field", ["stack_trace", "error.stack_trace", "exception.stacktrace", "exception"])
    def test_a_text_trace_in_any_trace_field_of_a_native_event(self, field: str) -> None:
        """An event with server_id and a text trace in any convention's trace field is parsed, not refused."""
        event = decode_one({"server_id": "inventory", "message": "failed", field: JAVA})
        assert event.exception_type == "java.lang.IllegalStateException"
        assert event.exceptions[-1].frames[0].function == "release"

    def test_nested_error_stack_trace_in_a_logstash_document(self) -> None:
        """ECS's nested `error.stack_trace` is found in a document that otherwise looks like logback."""
        event = decode_one({"@timestamp": "2024-05-02T10:14:03Z", "logger_name": "x", "app_name": "inventory",
                            "message": "m", "error": {"stack_trace": JAVA}})  # fmt: skip
        assert event.exception_type == "java.lang.IllegalStateException"

    def test_a_message_holding_a_trace_is_parsed_when_there_is_no_trace_field(self) -> None:
        """A logger that writes the whole trace into `message` still yields the exception and its frames."""
        event = decode_one({"server_id": "inventory", "message": JAVA})
        assert event.exception_type == "java.lang.IllegalStateException"
        assert event.raw_trace == JAVA and event.message == JAVA
        text_only = fingerprint_event(event)
        as_field = fingerprint_event(decode_one({"server_id": "inventory", "message": "x", "stack_trace": JAVA}))
        assert text_only.basis == "stacktrace" and text_only.fingerprint == as_field.fingerprint

    def test_a_multi_line_message_without_a_trace_stays_a_message(self) -> None:
        """Two lines of prose are no trace: the event keeps its message basis."""
        event = decode_one({"server_id": "s", "message": "first line\nsecond line"})
        assert event.exceptions == () and fingerprint_event(event).basis == "message"

    def test_a_trace_field_wins_over_a_trace_in_the_message(self) -> None:
        """With both, the trace field is the trace; the message stays the message."""
        other = "java.lang.RuntimeException: other\n\tat com.acme.Other.run(Other.java:1)"
        event = decode_one({"server_id": "s", "message": other, "stack_trace": JAVA})
        assert event.exception_type == "java.lang.IllegalStateException"

    @pytest.mark.parametrize("first", ["", "n/a"])
    @pytest.mark.parametrize("later", [{"error": {"stack_trace": JAVA}}, {"exception.stacktrace": JAVA},
                                       {"error.stack_trace": JAVA}])
    def test_the_first_trace_field_that_holds_a_trace_is_read(self, first: str, later: dict[str, Any]) -> None:
        """An empty or prose trace field before the one holding the trace does not hide it."""
        event = decode_one({"server_id": "s", "message": "hi", "stack_trace": first, **later})
        assert event.exception_type == "java.lang.IllegalStateException" and event.raw_trace == JAVA
        assert fingerprint_event(event).basis == "stacktrace"

    def test_a_text_trace_beside_a_structured_exception_without_frames_is_read(self) -> None:
        """A native exception object without frames declares the failure; a text trace field says where."""
        event = decode_one({"server_id": "s", "message": "hi", "stack_trace": JAVA,
                            "exception": {"type": "IllegalStateException", "value": "x", "stacktrace": []}})
        assert event.exception_type == "java.lang.IllegalStateException" and event.exceptions[-1].frames

    @pytest.mark.parametrize("declared", [
        {"error.type": "java.lang.IllegalStateException"}, {"error.message": "already released"},
        {"exception.type": "IllegalStateException", "exception.message": "x"},
        {"exception": {"type": "IllegalStateException", "value": "x"}},
        {"exception": {"type": "IllegalStateException", "value": "x", "stacktrace": []}},
        {"error.type": "java.lang.IllegalStateException", "stack_trace": "n/a"},
    ])  # fmt: skip
    def test_a_trace_in_the_message_is_read_beside_declared_type_fields(self, declared: dict[str, Any]) -> None:
        """Type and message fields without a trace beside them do not hide a trace logged as the message: the
        trace is read whole, as from a trace field (the type it prints, not the one declared)."""
        event = decode_one({"server_id": "s", "message": JAVA, **declared})
        assert event.exception_type == "java.lang.IllegalStateException" and event.raw_trace == JAVA
        assert fingerprint_event(event) == fingerprint_event(decode_one({"server_id": "s", "message": JAVA}))

    def test_a_trace_in_an_otlp_body_is_read_beside_exception_attributes(self) -> None:
        """OTLP's `exception.type` attribute without a stacktrace does not hide a trace logged as the body."""
        record = {"body": {"stringValue": PYTHON}, "attributes": [
            {"key": "exception.type", "value": {"stringValue": "PricingError"}}]}
        raw = orjson.dumps({"resourceLogs": [{"resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "pricing"}}]}, "scopeLogs": [{"logRecords": [record]}]}]})
        (event,) = decode_message(raw, DecodeConfig(), received_at=NOW)
        assert event.exceptions[0].type == "shop.pricing.errors.PricingError" and event.exceptions[-1].frames
        assert fingerprint_event(event).basis == "stacktrace"

    @pytest.mark.parametrize("trace_key", ["exception.stacktrace", "error.stack_trace", "stack_trace"])
    def test_otlp_attributes_named_as_the_other_conventions_name_them(self, trace_key: str) -> None:
        """A Collector that maps ECS or logstash fields to attributes keeps their names: the exception and the
        tenant are read from those spellings too, as from a flat record, and sign the same failure."""
        def attribute(key: str, value: str) -> dict[str, Any]:
            return {"key": key, "value": {"stringValue": value}}

        raw = orjson.dumps({"resourceLogs": [{
            "resource": {"attributes": [attribute("service.name", "inventory"), attribute("organization.id", "acme")]},
            "scopeLogs": [{"logRecords": [{"body": {"stringValue": "reservation failed"}, "attributes": [
                attribute("error.type", "java.lang.IllegalStateException"),
                attribute("error.message", "Reservation 7781 already released"), attribute(trace_key, JAVA)]}]}]}]})
        (event,) = decode_message(raw, DecodeConfig(), received_at=NOW)
        flat = decode_one({"service.name": "inventory", "organization.id": "acme", "message": "reservation failed",
                           "error.stack_trace": JAVA})
        assert (event.tenant, event.raw_trace, event.exception_type) == ("acme", JAVA, flat.exception_type)
        assert fingerprint_event(event) == fingerprint_event(flat) and fingerprint_event(event).basis == "stacktrace"
        assert not {"error.type", "error.message", trace_key} & event.extra.keys()

    @pytest.mark.parametrize("field", ["stack_trace", "exception", "error.stack_trace", "exception.stacktrace"])
    @pytest.mark.parametrize(("line", "declared"), [
        (JAVA_FAST_THROW, {"error.type": "java.lang.NullPointerException"}),
        (PYTHON.strip().rpartition("\n")[2], {"error.type": "shop.pricing.errors.PricingError",
                                              "error.message": "cannot price order 4711"}),
        (JAVA.partition("\n")[0], {"error.type": "java.lang.IllegalStateException",
                                   "error.message": "Reservation 7781 already released"}),
    ])  # fmt: skip
    def test_a_trace_field_holding_only_a_type_line_names_the_type(
            self, field: str, line: str, declared: dict[str, str]) -> None:
        """A trace printed without frames (the JVM's OmitStackTraceInFastThrow, a traceback's last line) is
        read as if its type and message had come in the type and message fields."""
        event = decode_one({"server_id": "s", "message": "hi", field: line})
        expected = decode_one({"server_id": "s", "message": "hi", **declared})
        assert [(e.type, e.value, e.frames) for e in event.exceptions] == [
            (e.type, e.value, ()) for e in expected.exceptions]
        assert fingerprint_event(event) == fingerprint_event(expected)
        assert fingerprint_event(event).basis == "message"

    @pytest.mark.parametrize("prose", ["n/a", "None", "see logs: request 17", "ERROR", "timeout: upstream",
                                       "Error Budget: exceeded", "java.lang.String: x"])
    def test_prose_in_a_trace_field_names_no_type(self, prose: str) -> None:
        """Only a name that looks like an exception class is read as a type; other text stays the message."""
        event = decode_one({"server_id": "s", "message": "hi", "stack_trace": prose})
        assert [(e.type, e.value) for e in event.exceptions] == [("", prose)]

    def test_exception_type_and_message_fields_of_every_convention(self) -> None:
        """ECS error.type/error.message and OTel's exception.type/exception.message make the exception."""
        ecs = decode_one({"server_id": "s", "error.type": "TimeoutError", "error.message": "upstream 3s"})
        otel = decode_one({"server_id": "s", "exception.type": "TimeoutError", "exception.message": "upstream 4s"})
        assert [(e.type, e.value) for e in ecs.exceptions] == [("TimeoutError", "upstream 3s")]
        assert fingerprint_event(ecs).fingerprint == fingerprint_event(otel).fingerprint


class TestOtherFields:
    def test_each_field_from_each_convention_in_one_message(self) -> None:
        """Native, ECS and logstash spellings mixed in one document are each read."""
        event = decode_one({"service.name": "inventory", "@timestamp": "2024-05-02T10:14:03Z", "log.level": "WARN",
                            "logger_name": "c.a.Inv", "message": "m", "service.version": "a1b2", "labels.tenant": "t7"})
        assert (event.server_id, event.level, event.logger, event.commit, event.tenant) == (
            "inventory", "warn", "c.a.Inv", "a1b2", "t7")
        assert event.timestamp == pytest.approx(1714644843.0)

    @pytest.mark.parametrize("version", [{"service.version": "a1b2c3d"}, {"service": {"version": "a1b2c3d"}}])
    def test_an_empty_commit_field_names_no_commit(self, version: dict[str, Any]) -> None:
        """`"commit": ""` (a build that left it blank) holds no value: the service version beside it is read."""
        assert decode_one({"server_id": "s", "message": "m", "commit": "", **version}).commit == "a1b2c3d"
        assert decode_one({"server_id": "s", "message": "m", "commit": ""}).commit is None

    def test_the_first_spelling_wins_when_two_conventions_disagree(self) -> None:
        """`timestamp` before `@timestamp`, `level` before `log.level`, `logger` before `logger_name`."""
        event = decode_one({"server_id": "s", "message": "m", "timestamp": 10.0, "@timestamp": 20.0,
                            "level": "warn", "log.level": "info", "logger": "a", "logger_name": "b"})
        assert (event.timestamp, event.level, event.logger) == (10.0, "warn", "a")

    def test_numeric_levels_on_the_pino_scale(self) -> None:
        """pino and bunyan log numbers: 50 is error, 40 warn, 60 fatal."""
        levels = [decode_one({"server_id": "s", "message": "m", "level": n}).level for n in (60, 50, 40, 30, 10)]
        assert levels == ["fatal", "error", "warn", "info", "trace"]

    def test_shape_labels_the_convention_a_message_resembles(self) -> None:
        """The label follows the markers; reading does not depend on it."""
        assert decode_one({"server_id": "s", "message": "m", "stack_trace": JAVA}).shape == "native"
        assert decode_one({"service.name": "s", "message": "m"}).shape == "ecs"
        assert decode_one({"app_name": "s", "message": "m", "logger_name": "x"}).shape == "logstash"


class TestReadmeExamples:
    def test_the_four_example_messages_decode_to_one_failure(self) -> None:
        """The README's one complete message per convention decode, and share one fingerprint."""
        text = (PROJECT_ROOT / "README.md").read_text()
        section = text[text.index("## Input"):text.index("## Configuration")]
        blocks = re.findall(r"```json\n(.*?)```", section, re.DOTALL)
        assert len(blocks) == 4
        events = [decode_message(json.dumps(json.loads(block)).encode(), DecodeConfig(), received_at=NOW)[0]
                  for block in blocks]  # fmt: skip
        assert {event.shape for event in events} == {"native", "ecs", "otel", "logstash"}
        assert {(event.server_id, event.commit, event.tenant) for event in events} == {("inventory", "9e1d4c2", "acme")}
        assert len({fingerprint_event(event).fingerprint for event in events}) == 1
        assert all(fingerprint_event(event).basis == "stacktrace" for event in events)
