"""The tolerant reader of analysis events."""

from __future__ import annotations

import orjson
import pytest

from consumer.notify.notice import BadNotice, issue_key, parse_notice
from tests.notify_events import event_bytes, make_analysis


class TestParseNotice:
    def test_reads_what_the_service_publishes(self) -> None:
        """The event the real encoder writes comes back with its burst, culprit, fix and past cases."""
        analysis = make_analysis()
        notice = parse_notice(event_bytes(analysis))
        assert notice is not None
        assert notice.analysis_id == analysis.analysis_id
        assert (notice.server, notice.cluster.count) == ("checkout-service", 42)
        assert notice.culprit is not None and notice.culprit.line == 6
        assert notice.fix is not None and notice.past_cases[0].score == 0.88

    def test_unknown_fields_and_extensions_are_ignored(self) -> None:
        """New optional fields anywhere and CloudEvents extension attributes do not make an event bad."""
        doc = orjson.loads(event_bytes(make_analysis()))
        doc.update(traceparent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", partitionkey="x",
                   dataschema="urn:logagent:schema:analysis-event:v1")
        doc["data"]["severity"] = "high"
        doc["data"]["cluster"]["region"] = "eu"
        doc["data"]["culprit"]["column"] = 3
        doc["data"]["past_cases"][0].update(verdict="correct", trust=1.0, note="fixed in 1.2")
        notice = parse_notice(orjson.dumps(doc))
        assert notice is not None and notice.past_cases[0].verdict == "correct"

    def test_another_event_type_is_not_an_error(self) -> None:
        """A well-formed event of another type is not ours to send: None, not BadNotice."""
        doc = orjson.loads(event_bytes(make_analysis()))
        assert parse_notice(orjson.dumps({**doc, "type": "logagent.analysis.v2"})) is None

    @pytest.mark.parametrize(("raw", "reason"), [
        (None, "empty"), (b"{nope", "not_json"), (b"[1]", "not_object"),
        (b'{"type": "logagent.analysis.v1", "data": {"analysis_id": "x"}}', "bad_event"),
        (b'{"type": "logagent.analysis.v1"}', "bad_event"),
    ])
    def test_what_is_not_an_analysis_is_bad_with_a_reason(self, raw: bytes | None, reason: str) -> None:
        """Broken records raise BadNotice with a short reason for the DLQ header."""
        with pytest.raises(BadNotice) as caught:
            parse_notice(raw)
        assert caught.value.reason == reason


class TestIssueKey:
    def test_same_failure_same_key_across_bursts(self) -> None:
        """Two bursts of one failure share the key; another fingerprint or server does not."""
        key = issue_key(parse_notice(event_bytes(make_analysis(first_seen=1.0))))  # type: ignore[arg-type]
        again = issue_key(parse_notice(event_bytes(make_analysis(first_seen=9.0))))  # type: ignore[arg-type]
        other = issue_key(parse_notice(event_bytes(make_analysis(fingerprint="fp-2"))))  # type: ignore[arg-type]
        elsewhere = issue_key(parse_notice(event_bytes(make_analysis("orders"))))  # type: ignore[arg-type]
        assert key == again and len({key, other, elsewhere}) == 3
        assert len(key) <= 50 and key.startswith("logagent:")
