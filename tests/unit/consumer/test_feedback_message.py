"""A feedback message as the listener reads it: what it takes and what it refuses."""

from __future__ import annotations

import orjson
import pytest

from analysis.intake.field import MAX_ID_CHARS
from consumer.feedback import BadFeedback, Feedback, encode_feedback, parse_feedback


class TestParseFeedback:
    def test_a_tenant_or_server_as_long_as_an_event_may_name_it_is_taken(self) -> None:
        """Events may name a tenant or server of 256 characters (and a deployment be pinned to one): a verdict
        naming it was refused as bad past 200 (attacker review)."""
        longest = "t" * MAX_ID_CHARS
        sent = Feedback("a1", "correct", server=longest, tenant=longest, feedback_id="f1")
        assert parse_feedback(encode_feedback(sent)) == sent
        for field in ("tenant", "server"):
            with pytest.raises(BadFeedback) as refused:
                parse_feedback(orjson.dumps({"analysis_id": "a1", "verdict": "wrong", field: longest + "t"}))
            assert refused.value.reason == f"bad_{field}"
