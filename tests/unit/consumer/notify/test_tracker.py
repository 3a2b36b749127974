"""Issue bodies and comments: markers, escaping, fences."""

from __future__ import annotations

import re

from consumer.notify.render import SourceLinks
from consumer.notify.tracker import _carries, analysis_marker, comment_body, issue_body, issue_title
from tests.notify_events import make_notice

LINKS = SourceLinks({"checkout-service": "https://github.com/acme/checkout"})



class TestIssueText:
    def test_body_and_comment_carry_their_analysis_marker_once(self) -> None:
        """The hidden marker is what a replay finds; it appears exactly once in each."""
        notice = make_notice()
        for text in (issue_body(notice, LINKS), comment_body(notice, LINKS)):
            assert text.count(analysis_marker(notice.analysis_id)) == 1

    def test_log_text_cannot_forge_a_marker_or_mention(self) -> None:
        """A root cause quoting a marker of another analysis, raw HTML or an @team mention is neutralised."""
        forged = analysis_marker("11111111-2222-3333-4444-555555555555")
        notice = make_notice(root_cause=f"{forged} <img src=x onerror=alert(1)> ping @acme/oncall")
        body = issue_body(notice, LINKS)
        assert forged not in body and "<img" not in body and "@acme" not in body
        assert body.count("<!--") == 1

    def test_log_text_cannot_link_embed_or_run_a_quick_action(self) -> None:
        """A root cause from a log's type and value (no model needed) with a phishing link, a tracking image
        and a line that GitLab would run as a quick action with the bot's rights: all inert text."""
        notice = make_notice(root_cause="ok\n/close now: x [Reset your SSO password](https://evil.example/login) "
                                        "![t](https://evil.example/pixel.png)\n  /unlabel ~logagent *loud* # h")
        body = issue_body(notice, LINKS)
        assert "](https://evil" not in body and "![" not in body and "*loud*" not in body
        assert not [line for line in body.splitlines() if line.lstrip().startswith("/")]
        assert "\\/close now" in body and "Reset your SSO password" in body

    def test_carriage_returns_autolinks_and_underlines_stay_inert(self) -> None:
        """The second review: `\\r\\r` ended an inline-code field (a type, a tenant, a path) and let a link and
        a mention out; GitLab drops `\\r` before looking for quick actions; GFM links bare `https://` and
        `www.`; `===` under a line makes it a heading. Every line break is a plain one now, a code span has
        none, and `:`, `.`, `-`, `=` are escaped."""
        notice = make_notice(root_cause="see https://evil.example/reset www.evil.com\nPWNED\n===\n\r/close x",
                             tenant="t\r\r@octocat [x](https://e.x)", server="checkout\n\r/label ~x\n",
                             fix={"path": "a\u2028[l](https://e.x)", "before": "x", "after": "y",
                                  "explanation": "ok\x0b/close"})
        body = issue_body(notice, LINKS)
        assert not [line for line in body.splitlines() if line.lstrip().startswith("/")]
        prose = re.sub(r"`[^`\n]*`|\(https://github\.com/acme/checkout/[^)\s]*\)", "", body)  # code spans, our links
        assert "https://" not in prose and "www.evil" not in prose
        assert "\n===" not in body and "\r" not in body and "\u2028" not in body and "\x0b" not in body
        assert "`t  @octocat [x](https://e.x)`" in body  # the tenant stays one code span

    def test_a_marker_counts_only_at_the_head_of_a_body(self) -> None:
        """The sink takes a body as an analysis's own only when the marker opens it: the same text inside,
        in a code span of a log's field, stands for nothing."""
        marker = analysis_marker("11111111-2222-3333-4444-555555555555")
        assert _carries(f"{marker}\n#### Seen again", marker) and _carries(f"\r\n{marker}", marker)
        assert not _carries(f"{analysis_marker('x')}\n**s** · tenant `{marker}`", marker)

    def test_a_fence_in_the_fix_cannot_close_the_diff(self) -> None:
        """The diff fence is longer than any backtick run inside the code."""
        notice = make_notice(fix={"path": "a.md", "before": "```", "after": "````", "explanation": ""})
        body = issue_body(notice, LINKS)
        assert "`````diff" in body

    def test_culprit_links_to_the_line_at_the_commit(self) -> None:
        """The culprit is a link to blob/<commit>/<path>#L<line> on the repository's host."""
        body = issue_body(make_notice(), LINKS)
        assert "(https://github.com/acme/checkout/blob/8d64db8cfd7d94f657446221beb0d96a7cbad642/src/main/java/" \
               "com/acme/checkout/web/QuantityParser.java#L6)" in body

    def test_title_names_the_failure_and_where(self) -> None:
        """`NumberFormatException on checkout-service in parse`."""
        assert issue_title(make_notice()) == "NumberFormatException on checkout-service in parse"
