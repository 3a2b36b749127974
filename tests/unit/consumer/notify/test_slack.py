"""The Slack Block Kit message and its text render."""

from __future__ import annotations

import orjson

from consumer.notify.render import SourceLinks
from consumer.notify.slack import render_text, slack_message
from tests.notify_events import COMMIT, make_notice
from tests.slack_server import block_errors

LINKS = SourceLinks({"checkout-service": "https://git.example.com/acme/checkout"})



class TestSlackMessage:
    def test_the_message_holds_what_a_responder_needs(self) -> None:
        """Server, count and span, exception, linked culprit, root cause, fix, past cases, analysis id."""
        notice = make_notice()
        text = orjson.dumps(slack_message(notice, LINKS)).decode()
        for shown in ("checkout-service", "42 events in 1m 35s", "java.lang.NumberFormatException",
                      f"<https://git.example.com/acme/checkout/blob/{COMMIT}/src/main/java/com/acme/checkout/web/"
                      "QuantityParser.java#L6|src/main/java/com/acme/checkout/web/QuantityParser.java:6>",
                      "inner space", "Strip inner whitespace", "Past cases: `e75231f8` 0.88",
                      notice.analysis_id):
            assert shown in text, shown

    def test_slack_would_accept_it_even_at_the_limits(self) -> None:
        """A huge root cause, fix and exception name are cut to Block Kit's limits, not refused by Slack."""
        huge = "x" * 10_000
        notice = make_notice(root_cause=huge, fix={"path": "a.py", "before": huge, "after": huge, "explanation": huge},
                         cluster={"server": "s" * 300, "tenant": "t", "fingerprint": "f",
                                  "exception_type": "E" * 500, "first_seen": 1.0, "last_seen": 2.0, "count": 3})
        assert block_errors(slack_message(notice, LINKS)) == []

    def test_log_text_cannot_mention_or_link(self) -> None:
        """`<!channel>`, `<@U123>` and `<http://evil|click>` from a log arrive escaped, not as markup."""
        notice = make_notice(root_cause="boom <!channel> <@U123> <http://evil.example|click> & more")
        text = orjson.dumps(slack_message(notice, LINKS)).decode()
        assert "<!channel>" not in text and "<@U123>" not in text and "<http://evil" not in text
        assert "&lt;!channel&gt;" in text and "&amp; more" in text

    def test_quoted_code_cannot_close_its_block(self) -> None:
        """A triple backtick inside quoted source stays inside the code block."""
        notice = make_notice(root_cause="see\n1| a = '```'\n2| b = 1")
        section = next(b for b in slack_message(notice, LINKS)["blocks"] if "Root cause" in b.get("text", {}).get(
            "text", ""))
        assert section["text"]["text"].count("```") == 2

    def test_without_a_known_repository_the_culprit_is_plain_text(self) -> None:
        """A server with no repository in the map gets no link rather than a wrong one."""
        text = orjson.dumps(slack_message(make_notice(server="unknown-svc"), LINKS)).decode()
        assert "QuantityParser.java:6" in text and "|src/main" not in text

    def test_a_failed_analysis_says_why(self) -> None:
        """A `failed` analysis has no culprit but names its failure reason."""
        text = orjson.dumps(slack_message(make_notice(status="failed"), LINKS)).decode()
        assert "Analysis failed" in text and "ollama unreachable" in text


class TestRenderText:
    def test_render_spells_out_every_block(self) -> None:
        """The text render has the header, each field, the sections and the links' targets."""
        rendered = render_text(slack_message(make_notice(), LINKS))
        assert rendered.splitlines()[0] == ":mag: NumberFormatException on checkout-service"
        assert "Events:     42 events in 1m 35s" in rendered
        assert f"<https://git.example.com/acme/checkout/commit/{COMMIT}>" in rendered
        assert "&lt;" not in rendered
