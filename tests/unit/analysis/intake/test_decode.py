"""Kafka message bytes decode into ErrorEvents for each input shape; bad input raises one reason each."""

from __future__ import annotations

import dataclasses
import inspect
import math
import time
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.errors import BadInput
from analysis.event import ErrorEvent, ExceptionInfo, new_event, new_exception
from analysis.intake.decode import BAD_INPUT_REASONS, DecodeConfig, decode_message
from analysis.intake.field import timestamp
from analysis.intake.redact import Redactor
from consumer.keying import KeyReader
from tests.paths import TRACES

TRACES = TRACES
CONFIG = DecodeConfig()
JAVA = (TRACES / "java_inventory.txt").read_text()
NOW = 1_700_000_000.0


def decode_one(document: Any, config: DecodeConfig = CONFIG) -> ErrorEvent:
    (event,) = decode_message(orjson.dumps(document), config, received_at=NOW)
    return event


def reason(raw: bytes, config: DecodeConfig = CONFIG) -> str:
    with pytest.raises(BadInput) as caught:
        decode_message(raw, config, received_at=NOW)
    assert caught.value.reason in BAD_INPUT_REASONS
    return caught.value.reason


def attribute(key: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "value": value}


class TestNativeShape:
    def test_fields_and_frames_reversed_innermost_first(self) -> None:
        """Native events keep their fields; Sentry-ordered frames (caller first) are turned innermost first."""
        event = decode_one({
            "server_id": "orders", "timestamp": "2024-05-02T10:14:03.5Z", "level": "ERROR", "logger": "o.Svc",
            "message": "order failed", "commit": "3f2a9c1", "tenant": "acme", "region": "eu-1",
            "exception": {
                "type": "ValueError", "value": "bad qty",
                "stacktrace": [
                    {"filename": "app/main.py", "function": "main", "lineno": 3, "in_app": True},
                    {"filename": "app/orders.py", "abs_path": "/srv/app/orders.py", "module": "app.orders",
                     "function": "place", "lineno": 41},
                ],
                "chained": [{"type": "KeyError", "value": "'qty'", "stacktrace": []}],
            },
        })  # fmt: skip
        assert (event.server_id, event.level, event.logger, event.commit, event.tenant) == (
            "orders", "error", "o.Svc", "3f2a9c1", "acme",
        )  # fmt: skip
        assert event.timestamp == 1714644843.5
        assert event.shape == "native"
        assert [exception.type for exception in event.exceptions] == ["ValueError", "KeyError"]
        assert event.exception_type == "KeyError"
        outer = event.exceptions[0]
        assert [(f.function, f.module, f.abs_path, f.lineno, f.in_app) for f in outer.frames] == [
            ("place", "app.orders", "/srv/app/orders.py", 41, None),
            ("main", "", "", 3, True),
        ]
        assert event.extra == {"region": "eu-1"}

    def test_message_only_and_defaults(self) -> None:
        """A message without exception is an error; tenant and level default, epoch ms become seconds."""
        event = decode_one({"server_id": "orders", "timestamp": 1714644843551, "message": "queue full"})
        assert (event.message, event.tenant, event.level, event.exceptions) == ("queue full", "default", "error", ())
        assert event.timestamp == pytest.approx(1714644843.551)

    def test_exception_without_message_gets_a_summary_message(self) -> None:
        """An exception alone is enough; its type and value become the message."""
        event = decode_one({"server_id": "s", "exception": {"type": "IOError", "value": "disk full"}})
        assert event.message == "IOError: disk full"
        assert event.timestamp == NOW  # no timestamp: the receive time stands in

    def test_max_frames_keeps_innermost(self) -> None:
        """Very long structured traces are cut to `max_frames`, keeping the frames nearest the failure."""
        frames = [{"function": f"f{i}", "filename": "a.py"} for i in range(50)]
        event = decode_one(
            {"server_id": "s", "exception": {"type": "E", "stacktrace": frames}}, DecodeConfig(max_frames=5)
        )
        assert [f.function for f in event.exceptions[0].frames] == ["f49", "f48", "f47", "f46", "f45"]

    def test_commit_field_override(self) -> None:
        """A configured dotted `commit_field` names where the deployed revision lives."""
        document = {"server_id": "s", "message": "m", "commit": "old", "build": {"git": {"sha": "9e1d"}}}
        assert decode_one(document, DecodeConfig(commit_field="build.git.sha")).commit == "9e1d"
        assert decode_one(document).commit == "old"


class TestEcsShape:
    def test_dotted_keys(self) -> None:
        """Flat dotted ECS keys: service, version as commit, level, logger, error fields and raw trace."""
        event = decode_one({
            "@timestamp": "2024-05-02T10:14:03.551Z", "service.name": "inventory", "service.version": "a1b2c3",
            "log.level": "ERROR", "log.logger": "c.a.Inv", "message": "release failed",
            "error.type": "java.lang.IllegalStateException", "error.message": "Reservation 7781 already released",
            "error.stack_trace": JAVA, "labels.tenant": "acme", "trace.id": "abc",
        })  # fmt: skip
        assert (event.shape, event.server_id, event.commit, event.level, event.logger, event.tenant) == (
            "ecs", "inventory", "a1b2c3", "error", "c.a.Inv", "acme",
        )  # fmt: skip
        assert event.raw_trace == JAVA
        assert event.exception_type == "java.lang.IllegalStateException"
        assert event.exceptions[0].frames[0].function == "release"
        assert event.extra == {"trace.id": "abc"}

    def test_nested_objects(self) -> None:
        """The same fields as nested objects, and organization.id as tenant."""
        event = decode_one({
            "@timestamp": "2024-05-02T10:14:03Z", "service": {"name": "inventory", "version": "a1b2c3"},
            "log": {"level": "warn"}, "message": "m", "organization": {"id": "tenant-7"},
            "error": {"type": "Oops", "message": "no trace here"},
        })  # fmt: skip
        assert (event.server_id, event.commit, event.level, event.tenant) == ("inventory", "a1b2c3", "warn", "tenant-7")
        assert [(e.type, e.value, e.frames) for e in event.exceptions] == [("Oops", "no trace here", ())]
        assert event.extra == {
            "service": {"name": "inventory", "version": "a1b2c3"},
            "organization": {"id": "tenant-7"},
        }

    def test_dotted_key_wins_over_nested_object(self) -> None:
        """When a field is both flat and nested, the flat dotted key is read; an empty flat one is not."""
        event = decode_one({
            "@timestamp": "2024-05-02T10:14:03Z", "service.name": "flat", "service": {"name": "nested"},
            "error.type": None, "error": {"type": "NestedType"}, "message": "m",
        })  # fmt: skip
        assert (event.server_id, event.exception_type) == ("flat", "NestedType")


class TestOtelShape:
    def test_three_records_in_one_message(self) -> None:
        """One OTLP message with two resources and three records decodes to three events, in order."""

        def record(message: str, trace: str | None = None, severity: int = 17) -> dict[str, Any]:
            attributes = [attribute("thread.name", {"stringValue": "main"})]
            if trace:
                attributes.append(attribute("exception.stacktrace", {"stringValue": trace}))
            return {"timeUnixNano": "1714644843551000000", "severityNumber": severity,
                    "body": {"stringValue": message}, "attributes": attributes, "traceId": "5b8e"}  # fmt: skip

        def resource(name: str, *extra: dict[str, Any]) -> dict[str, Any]:
            return {"attributes": [attribute("service.name", {"stringValue": name}), *extra]}

        message = {"resourceLogs": [
            {"resource": resource("inventory", attribute("tenant", {"stringValue": "acme"}),
                                  attribute("service.version", {"stringValue": "a1b2c3"}),
                                  attribute("host.cpus", {"intValue": "8"})),
             "scopeLogs": [{"scope": {"name": "com.acme.inventory"},
                            "logRecords": [record("release failed", JAVA), record("slow", severity=13)]}]},
            {"resource": resource("billing"), "scopeLogs": [{"logRecords": [record("invoice failed")]}]},
        ]}  # fmt: skip
        events = decode_message(orjson.dumps(message), CONFIG, received_at=NOW)
        assert [(e.server_id, e.message, e.level, e.tenant) for e in events] == [
            ("inventory", "release failed", "error", "acme"),
            ("inventory", "slow", "warn", "acme"),
            ("billing", "invoice failed", "error", "default"),
        ]
        first = events[0]
        assert (first.shape, first.logger, first.commit) == ("otel", "com.acme.inventory", "a1b2c3")
        assert first.timestamp == pytest.approx(1714644843.551)
        assert first.exception_type == "java.lang.IllegalStateException"
        assert first.extra == {"thread.name": "main", "resource.service.version": "a1b2c3",
                               "resource.host.cpus": 8, "traceId": "5b8e"}  # fmt: skip

    def test_exception_attributes_without_stacktrace(self) -> None:
        """exception.type and exception.message alone make the exception; the body may be absent."""
        record = {"attributes": [attribute("exception.type", {"stringValue": "TimeoutError"}),
                                 attribute("exception.message", {"stringValue": "upstream 3s"})]}  # fmt: skip
        resource = {"attributes": [attribute("service.name", {"stringValue": "gw"})]}
        event = decode_one({"resourceLogs": [{"resource": resource, "scopeLogs": [{"logRecords": [record]}]}]})
        assert (event.message, event.exception_type) == ("TimeoutError: upstream 3s", "TimeoutError")


class TestLogstashShape:
    def test_logback_encoder_fields(self) -> None:
        """@timestamp, logger_name, level, stack_trace, HOSTNAME as server when no app name is set."""
        event = decode_one({
            "@timestamp": "2024-05-02T10:14:03.551+02:00", "@version": "1", "message": "release failed",
            "logger_name": "com.acme.inventory.ReservationService", "thread_name": "http-nio-8080-exec-3",
            "level": "ERROR", "level_value": 40000, "stack_trace": JAVA, "HOSTNAME": "inventory-7d9f",
        })  # fmt: skip
        assert (event.shape, event.server_id, event.logger, event.level) == (
            "logstash", "inventory-7d9f", "com.acme.inventory.ReservationService", "error",
        )  # fmt: skip
        assert event.timestamp == pytest.approx(1714644843.551 - 7200)
        assert event.exception_type == "java.lang.IllegalStateException"
        assert event.extra["thread_name"] == "http-nio-8080-exec-3"

    def test_app_name_wins_over_hostname(self) -> None:
        """A configured app name identifies the server better than the pod's host name."""
        event = decode_one({"@timestamp": "2024-05-02T10:14:03Z", "message": "m", "logger_name": "x",
                            "app_name": "inventory", "HOSTNAME": "inventory-7d9f"})  # fmt: skip
        assert event.server_id == "inventory"


class TestTimestamps:
    def test_iso_utc_epoch_units_and_fallbacks(self) -> None:
        """ISO UTC times (with and without milliseconds, cached or not) and epoch s/ms/µs/ns agree."""
        expected = datetime(2024, 5, 2, 10, 14, 3, 551000, tzinfo=UTC).timestamp()
        stamps = ["2024-05-02T10:14:03.551Z", "2024-05-02T10:14:03.551Z", "2024-05-02T10:14:03.551+00:00",
                  "2024-05-02T12:14:03.551+02:00", expected, expected * 1e3, int(expected * 1e6),
                  int(expected * 1e3) * 1_000_000]  # fmt: skip
        times = [decode_one({"server_id": "s", "message": "m", "timestamp": stamp}).timestamp for stamp in stamps]
        assert times == [pytest.approx(expected, abs=1e-6)] * len(stamps)
        assert times[0] == datetime.fromisoformat("2024-05-02T10:14:03.551+00:00").timestamp()
        assert decode_one({"server_id": "s", "message": "m", "timestamp": "2024-05-02T10:14:03Z"}).timestamp == (
            expected - 0.551
        )
        for odd in ("2024-05-02T10:14:03.5²1Z", "2024-05-02T10:14:03.5x1Z", "not a time"):
            assert decode_one({"server_id": "s", "message": "m", "timestamp": odd}).timestamp == NOW, odd

    @given(st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(10**20), 10**20))
    def test_an_epoch_number_of_any_magnitude_reads_as_its_unit_says(self, number: float) -> None:
        """Seconds (the quick case), ms, µs, ns and out-of-range numbers: each rule as documented."""
        seconds = float(number)
        for limit, scale in ((1e17, 1e9), (1e14, 1e6), (1e11, 1e3)):
            if abs(seconds) > limit:
                seconds /= scale
                break
        expected = seconds if math.isfinite(seconds) and 0 <= seconds <= 1e10 else NOW
        assert timestamp(number, NOW) == expected
        assert type(timestamp(number, NOW)) is float


class TestFastConstruction:
    def test_fast_constructors_build_ordinary_frozen_dataclasses(self) -> None:
        """`new_event` / `new_exception` give objects equal to, and as frozen as, the dataclass constructors."""
        info = new_exception("E", "v", ())
        event = new_event("s", 1.0, "m", "warn", "lg", "c1", "t", (info,), "raw", "ecs", {"k": 1})
        assert type(event) is ErrorEvent and type(info) is ExceptionInfo
        assert event == ErrorEvent("s", 1.0, "m", "warn", "lg", "c1", "t", (ExceptionInfo("E", "v"),), "raw", "ecs",
                                   {"k": 1})  # fmt: skip
        with pytest.raises(dataclasses.FrozenInstanceError):
            event.message = "changed"  # type: ignore[misc]
        assert dataclasses.replace(event, message="x").message == "x"

    def test_builders_hold_exactly_the_dataclass_fields(self) -> None:
        """A field added to the dataclasses must be added to the fast constructors too."""
        assert inspect.signature(new_event).parameters.keys() == {f.name for f in dataclasses.fields(ErrorEvent)}
        assert inspect.signature(new_exception).parameters.keys() == {f.name for f in dataclasses.fields(ExceptionInfo)}


class TestBadInput:
    def test_too_large_is_checked_before_parsing(self) -> None:
        """A message over the byte cap is refused before any parsing, even if it is not JSON."""
        assert reason(b"x" * 101, DecodeConfig(max_message_bytes=100)) == "too_large"

    def test_invalid_utf8(self) -> None:
        """Bytes that are not UTF-8, and escaped lone surrogates, are invalid_utf8."""
        assert reason(b'{"server_id": "s", "message": "caf\xe9"}') == "invalid_utf8"
        assert reason(b'{"server_id": "s", "message": "\\ud800"}') == "invalid_utf8"

    def test_not_json_and_not_object(self) -> None:
        """Text that is no JSON, and JSON that is no object, each have their reason."""
        assert reason(b"ERROR something broke") == "not_json"
        assert reason(b"") == "not_json"
        assert reason(b'["server_id", "s"]') == "not_object"
        assert reason(b"42") == "not_object"

    def test_an_otlp_batch_that_copies_its_resource_too_often_is_too_large(self) -> None:
        """An attacker review: 8,000 resource attributes over 8,000 records (471 kB) took 27 s and 5.5 GB, each
        record copying the resource; the key stage's reads too. Both refuse it now, before the copies; a
        Collector's full batch (8,192 records under a 2 kB resource, 5.6 MB) decodes."""
        def batch(attributes: int, records: int, value: str) -> bytes:
            resource = [attribute("service.name", {"stringValue": "svc"}),
                        *(attribute(f"a{i}", {"stringValue": value}) for i in range(attributes))]
            return orjson.dumps({"resourceLogs": [{"resource": {"attributes": resource}, "scopeLogs": [
                {"logRecords": [{"body": {"stringValue": "boom"}, "timeUnixNano": "1700000000000000000"}
                                for n in range(records)]}]}]})
        hostile = batch(8_000, 8_000, "")
        assert len(hostile) < CONFIG.max_message_bytes
        assert reason(hostile) == "too_large"
        with pytest.raises(BadInput) as caught:
            KeyReader(CONFIG, Redactor()).read_sightings(hostile, NOW)
        assert caught.value.reason == "too_large" and "copies its resource" in str(caught.value)
        # A second review: attributes without a value weigh 14 bytes of JSON, but a dict entry in each record.
        bare = orjson.loads(batch(4_500, 1_800, ""))
        for item in bare["resourceLogs"][0]["resource"]["attributes"][1:]:
            del item["value"]
        assert reason(orjson.dumps(bare)) == "too_large"
        full = batch(50, 8_192, "v" * 24)
        assert len(decode_message(full, CONFIG, received_at=NOW)) == 8_192
        assert len(KeyReader(CONFIG, Redactor()).read_sightings(full, NOW)) == 8_192

    def test_empty_scopes_under_a_large_resource_cost_nothing_each(self) -> None:
        """A second review: 20,000 scopes without records under a 420 kB resource took the key stage 15 s,
        which wrote the resource's JSON once per scope."""
        resource = [attribute("service.name", {"stringValue": "svc"}),
                    *({"key": f"k{i}"} for i in range(30_000))]
        raw = orjson.dumps({"resourceLogs": [{"resource": {"attributes": resource}, "scopeLogs": [
            *[{"logRecords": []}] * 20_000, {"logRecords": [{"body": {"stringValue": "boom"}}]}]}]})
        started = time.process_time()
        assert len(KeyReader(CONFIG, Redactor()).read_sightings(raw, NOW)) == 1
        assert time.process_time() - started < 2.0  # 0.1 s; 15 s before

    def test_too_deep(self) -> None:
        """Nesting past max_depth, and past the JSON parser's own limit, is too_deep."""
        nested = b'{"server_id": "s", "message": "m", "ctx": ' + b'{"a": ' * 70 + b"1" + b"}" * 70 + b"}"
        assert reason(nested) == "too_deep"
        assert reason(b"[" * 5000 + b"]" * 5000) == "too_deep"

    def test_wrong_type(self) -> None:
        """Fields of the wrong JSON type are wrong_type: message, stacktrace, lineno, timestamp, attributes."""
        cases = [
            {"server_id": "s", "message": 42},
            {"server_id": "s", "exception": {"type": "E", "stacktrace": "at x"}},
            {"server_id": "s", "exception": {"type": "E", "stacktrace": [{"function": "f", "lineno": "12"}]}},
            {"server_id": "s", "exception": ["boom"]},
            {"server_id": "s", "message": "m", "timestamp": [1]},
            {"@timestamp": "2024-05-02T10:14:03Z", "service.name": "s", "message": "m", "error.stack_trace": 7},
            {"resourceLogs": {"not": "a list"}},
        ]
        assert [reason(orjson.dumps(case)) for case in cases] == ["wrong_type"] * len(cases)

    def test_a_line_number_past_nine_digits_names_no_line(self) -> None:
        """`lineno: 4111111111111111` in a structured frame is no line of any file (as in text traces, which
        read nine digits at most): the frame keeps its place without one."""
        doc = {"server_id": "s", "exception": {"type": "KeyError", "value": "'x'", "stacktrace": [
            {"filename": "app/shop.py", "function": "total", "lineno": 4111111111111111, "in_app": True},
            {"filename": "app/shop.py", "function": "main", "lineno": 999_999_999, "in_app": True}]}}
        frames = decode_message(orjson.dumps(doc), DecodeConfig())[0].exceptions[-1].frames
        assert [frame.lineno for frame in frames] == [999_999_999, None]

    def test_no_error(self) -> None:
        """Neither a message nor an exception: nothing to analyse."""
        assert reason(orjson.dumps({"server_id": "s", "level": "error"})) == "no_error"
        assert reason(orjson.dumps({"server_id": "s", "message": "", "exception": {}})) == "no_error"
        assert reason(orjson.dumps({"resourceLogs": []})) == "no_error"

    def test_missing_server(self) -> None:
        """An error that names no server cannot be grouped or analysed."""
        assert reason(orjson.dumps({"message": "m"})) == "missing_server"
        assert reason(orjson.dumps({"@timestamp": "2024-05-02T10:14:03Z", "log.level": "error",
                                    "message": "m"})) == "missing_server"  # fmt: skip

    def test_an_identity_over_256_characters(self) -> None:
        """A server id, tenant or commit of 300k characters would make an analysis event over the broker's
        limit (its publish then failed for ever): the DLQ takes it; 256 characters still pass."""
        long = "é" * 300_000
        cases = [{"server_id": long, "message": "m"}, {"server_id": "s", "tenant": long, "message": "m"},
                 {"server_id": "s", "commit": long, "message": "m"},
                 {"@timestamp": "2024-05-02T10:14:03Z", "service.name": long, "message": "m"},
                 {"resourceLogs": [{"resource": {"attributes": [{"key": "service.name", "value": {
                     "stringValue": long}}]}, "scopeLogs": [{"logRecords": [{"body": {"stringValue": "m"}}]}]}]}]
        assert [reason(orjson.dumps(case)) for case in cases] == ["id_too_long"] * len(cases)
        assert decode_one({"server_id": "s" * 256, "tenant": "t" * 256, "commit": "c" * 256, "message": "m"})

    def test_cached_structured_frames_never_hide_a_wrong_type(self) -> None:
        """A frame list equal to a cached one except `lineno: 1.0` (== 1 in Python) is still wrong_type."""
        frames = [{"function": "f", "filename": "a.py", "lineno": 1}]
        decode_one({"server_id": "s", "exception": {"type": "E", "stacktrace": frames}})
        frames[0]["lineno"] = 1.0
        assert reason(orjson.dumps({"server_id": "s", "exception": {"type": "E", "stacktrace": frames}})) == (
            "wrong_type"
        )

    def test_unknown_fields_and_odd_timestamps_are_not_fatal(self) -> None:
        """Unknown fields are kept and an unreadable timestamp falls back to the receive time."""
        event = decode_one({"server_id": "s", "message": "m", "timestamp": "yesterday", "weird": {"x": [1, 2]}})
        assert event.timestamp == NOW
        assert event.extra == {"weird": {"x": [1, 2]}}


class TestPinnedTenant:
    """`DecodeConfig.tenant`: a deployment of one tenant, whose producers may not choose another."""

    PINNED = DecodeConfig(tenant="acme")

    def test_an_event_naming_no_tenant_or_this_one_is_this_tenants(self) -> None:
        otlp = {"resourceLogs": [{"resource": {"attributes": [attribute("service.name", {"stringValue": "s"})]},
                                  "scopeLogs": [{"logRecords": [{"body": {"stringValue": "m"}}]}]}]}
        for document in ({"server_id": "s", "message": "m"}, {"server_id": "s", "tenant": "acme", "message": "m"},
                         {"service.name": "s", "labels.tenant": "acme", "message": "m"}, otlp):
            assert decode_one(document, self.PINNED).tenant == "acme", document
        assert decode_one({"server_id": "s", "message": "m"}).tenant == "default"  # unpinned, as before

    def test_an_event_naming_another_tenant_is_refused_in_every_shape(self) -> None:
        record = {"body": {"stringValue": "m"}, "attributes": [attribute("tenant", {"stringValue": "globex"})]}
        otlp = {"resourceLogs": [{"resource": {"attributes": [attribute("service.name", {"stringValue": "s"})]},
                                  "scopeLogs": [{"logRecords": [{"body": {"stringValue": "ok"}}, record]}]}]}
        for document in ({"server_id": "s", "tenant": "globex", "message": "m"},
                         {"server_id": "s", "tenant": "default", "message": "m"},
                         {"server_id": "s", "tenant": 7, "message": "m"},
                         {"service.name": "s", "organization": {"id": "globex"}, "message": "m"}, otlp):
            assert reason(orjson.dumps(document), self.PINNED) == "tenant_mismatch", document
        assert decode_one({"server_id": "s", "tenant": "globex", "message": "m"}).tenant == "globex"  # unpinned
