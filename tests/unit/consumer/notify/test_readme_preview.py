"""The README's Slack message is what the code renders from the demo analysis it names."""

from __future__ import annotations

import re

from consumer.notify.notice import parse_notice
from consumer.notify.render import SourceLinks
from consumer.notify.slack import render_text, slack_message
from tests.paths import PROJECT_ROOT

_FIXTURE = PROJECT_ROOT / "tests" / "fixtures" / "notify" / "demo-analysis.json"
_BLOCK = re.compile(r"<!-- slack-preview:start -->\n````text\n(?P<text>.*?)````\n<!-- slack-preview:end -->", re.S)


class TestReadmePreview:
    def test_the_readme_shows_the_current_render(self) -> None:
        """Regenerate the README block with the command above it when the message changes."""
        match = _BLOCK.search((PROJECT_ROOT / "README.md").read_text(encoding="utf-8"))
        assert match is not None, "the README lost its Slack preview block"
        notice = parse_notice(b'{"type": "logagent.analysis.v1", "data": ' + _FIXTURE.read_bytes() + b"}")
        assert notice is not None
        links = SourceLinks({"checkout-service": "https://git.example.com/acme/checkout-service"})
        assert match["text"] == render_text(slack_message(notice, links))
