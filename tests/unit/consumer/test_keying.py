"""The burst key of a message and the repartition record that carries it: grouping, splitting, headers."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.errors import BadInput
from analysis.intake.decode import DecodeConfig
from analysis.intake.redact import RedactionConfig, Redactor
from consumer.keying import KeyReader, forwarded_values, group_sightings, read_repartitioned, repartition_record

_READER = KeyReader(DecodeConfig(), Redactor(RedactionConfig()))
_TP = ("errors", 7)
_AWS = "AKIAIOSFODNN7EXAMPLE"


def _native(server: str, ts: float, message: str = "boom", tenant: str = "acme") -> bytes:
    return orjson.dumps({"server_id": server, "timestamp": ts, "message": message, "tenant": tenant,
                         "commit": "c1", "exception": {"type": "KeyError", "value": message, "stacktrace": [
                             {"filename": "app/shop.py", "function": "total", "lineno": 3, "in_app": True}]}})


def _record(ts: float, exc: str, message: str) -> dict[str, Any]:
    return {"timeUnixNano": str(int(ts * 1e9)), "severityText": "ERROR", "body": {"stringValue": message},
            "attributes": [{"key": "exception.type", "value": {"stringValue": exc}},
                           {"key": "exception.message", "value": {"stringValue": message}}]}


def _otlp(batches: list[tuple[str, list[dict[str, Any]]]]) -> bytes:
    """One OTLP/JSON export request: per (service name, records) a resource with one named scope."""
    return orjson.dumps({"resourceLogs": [
        {"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
         "scopeLogs": [{"scope": {"name": f"{service}.logger"}, "logRecords": records}]}
        for service, records in batches]})


def _forward(raw: bytes, offset: int = 41) -> list[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
    """(key, value, headers) of every repartition record the key stage sends for `raw`."""
    groups = group_sightings(_READER.read_sightings(raw, received_at=1.0))
    values = forwarded_values(raw, groups)
    return [(group.partition_key, value, repartition_record(group, index, _TP, offset, value is not raw, 1.0))
            for index, (group, value) in enumerate(zip(groups, values, strict=True))]


class TestForwarding:
    def test_a_message_of_one_record_is_forwarded_as_its_original_bytes(self) -> None:
        """The usual message: one record, its own bytes, keyed by (server, fingerprint), its key and
        source in headers that read back to the very sighting the key stage computed."""
        raw = _native("checkout", 100.0)
        ((key, value, headers),) = _forward(raw)
        (sighting,) = _READER.read_sightings(raw, received_at=1.0)
        assert value is raw
        assert orjson.loads(key) == ["checkout", sighting.fingerprint]
        forwarded = read_repartitioned(headers)
        assert forwarded.records == ((0, sighting),)
        assert (forwarded.source, forwarded.source_position) == (_TP, (41, 0))

    def test_tenants_of_one_failure_share_the_partition_key_but_not_the_burst(self) -> None:
        """The key is (server, fingerprint): both tenants' events meet at one owner, which keeps their
        bursts apart by tenant."""
        (acme,) = _forward(_native("checkout", 1.0, tenant="acme"))
        (globex,) = _forward(_native("checkout", 1.0, tenant="globex"))
        assert acme[0] == globex[0]
        assert read_repartitioned(acme[2]).records[0][1].tenant == "acme"
        assert read_repartitioned(globex[2]).records[0][1].tenant == "globex"

    def test_an_otlp_batch_of_several_keys_is_split_so_each_record_reaches_its_own_owner_once(self) -> None:
        """Records of two services and two failures, interleaved: one record per key group, each record in
        exactly one group, and each group's value decodes to exactly its own records."""
        raw = _otlp([("cart", [_record(10.0, "Timeout", "t1"), _record(11.0, "Refused", "r1"),
                               _record(12.0, "Timeout", "t2")]),
                     ("pay", [_record(13.0, "Timeout", "t3")])])
        full = _READER.read_sightings(raw, received_at=1.0)
        forwards = _forward(raw)
        counted = [s for _, _, headers in forwards for _, s in read_repartitioned(headers).records]
        assert sorted(counted) == sorted(full) and len(counted) == 4
        assert [read_repartitioned(h).source_position for _, _, h in forwards] == [(41, 0), (41, 1), (41, 2)]
        for key, value, headers in forwards:
            assert value is not raw
            forwarded = read_repartitioned(headers)
            decoded = _READER.read_sightings(value, received_at=1.0)
            assert [(index, decoded[index]) for index, _ in forwarded.records] == list(forwarded.records)
            assert len(decoded) == len(forwarded.records)
            assert orjson.loads(key) == [forwarded.records[0][1].server, forwarded.records[0][1].fingerprint]
        assert sum(len(value) for _, value, _ in forwards) < 2 * len(raw)

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.tuples(st.sampled_from(["cart", "pay", "ship"]), st.sampled_from(["A", "B", "C"])),
                    min_size=1, max_size=12))
    def test_any_otlp_batch_is_forwarded_without_losing_or_doubling_a_record(
            self, records: list[tuple[str, str]]) -> None:
        """Whatever the mix of services and failures, the forwarded groups hold every record once, each
        under the key it has in the whole batch."""
        raw = _otlp([(service, [_record(20.0 + i, exc, f"m{i}")]) for i, (service, exc) in enumerate(records)])
        full = _READER.read_sightings(raw, received_at=1.0)
        counted = [s for _, value, headers in _forward(raw) for _, s in read_repartitioned(headers).records]
        assert sorted(counted) == sorted(full)

    def test_a_batch_whose_slices_would_weigh_far_more_than_itself_is_bad_input(self) -> None:
        """60 failures under one 200 kB resource: every slice repeats the resource, 12 MB out of 200 kB (8,000
        under 500 kB would make 4 GB). Past 4x the batch plus 1 MiB it is refused, as `too_large_to_split`,
        and the DLQ takes it whole; a batch of a few keys under the same resource still splits."""
        resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "cart"}},
                                   {"key": "build.notes", "value": {"stringValue": "n" * 200_000}}]}

        def batch(keys: int) -> bytes:
            records = [_record(10.0 + i, f"Error{i}", f"failed {i}") for i in range(keys)]
            return orjson.dumps({"resourceLogs": [{"resource": resource, "scopeLogs": [{"logRecords": records}]}]})

        with pytest.raises(BadInput) as refused:
            _forward(batch(60))
        assert refused.value.reason == "too_large_to_split"
        assert len(_forward(batch(3))) == 3

    def test_headers_carry_only_redacted_text(self) -> None:
        """A secret in the message reaches no header: the key stage redacts before it keys."""
        ((_, _, headers),) = _forward(_native("checkout", 1.0, message=f"login failed key={_AWS}"))
        assert not any(_AWS.encode() in value for _, value in headers)
        assert "login failed" in read_repartitioned(headers).records[0][1].message


class TestReadingRecords:
    @pytest.mark.parametrize("headers", [
        [],
        [("fingerprint", b"f")],
        [(name, b"x") for name in ("fingerprint", "server", "tenant", "exception_type", "events", "source_topic",
                                   "source_partition", "source_offset", "group")],
    ])
    def test_a_record_the_key_stage_did_not_write_is_bad_input(self, headers: list[tuple[str, bytes]]) -> None:
        """Missing or unreadable headers: `not_forwarded`, which the window stage sends to the DLQ."""
        with pytest.raises(BadInput) as caught:
            read_repartitioned(headers)
        assert caught.value.reason == "not_forwarded"

    @pytest.mark.parametrize(("name", "value"), [
        ("server", None),  # Kafka allows null header values
        ("events", None),
        ("events", b'[[0, NaN, null, "boom"]]'),
        ("events", b'[[0, "100", null, "boom"]]'),
        ("events", b'[[0, 1e400, null, "boom"]]'),
        ("events", b'[[0, -5.0, null, "boom"]]'),
        ("events", b'[[-1, 100.0, null, "boom"]]'),
        ("events", b'[[0.5, 100.0, null, "boom"]]'),
        ("events", b'[[0, 100.0, 7, "boom"]]'),
        ("events", b'[[0, 100.0, null, {"a": 1}]]'),
        ("source_offset", b"-3"),
    ])
    def test_a_forged_header_is_bad_input_not_a_crash(self, name: str, value: bytes | None) -> None:
        """Every value is checked as the key stage writes it: a null header, a time that is not finite epoch
        seconds (a NaN would be published as the burst's `first_seen`), a negative index, a non-text
        message; each is `not_forwarded`, never another exception that would stop the window stage."""
        ((_, _, headers),) = _forward(_native("checkout", 100.0))
        forged = [(n, value if n == name else v) for n, v in headers]
        with pytest.raises(BadInput) as caught:
            read_repartitioned(forged)  # type: ignore[arg-type]
        assert caught.value.reason == "not_forwarded"
