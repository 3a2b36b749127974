"""Slack: an incoming webhook receives one Block Kit message per analysis.

The message shows the server, the burst's count and span, the exception, the culprit `path:line` linked
to the file at the deployed commit, the root cause, the suggested fix and the past cases. Every text that
came from logs or the model is escaped (`&`, `<`, `>`), so a log line saying `<!channel>` pings nobody.
Incoming webhooks have no idempotency key: a restart between a post and its offset commit posts the
message again (at least once).
"""

from __future__ import annotations

import re
from typing import Any

import httpx

from consumer.notify.notice import Notice
from consumer.notify.render import SourceLinks, clip, headline, judged, place, prose_and_code, span_text
from consumer.notify.transport import Outcome, request

__all__ = ["SlackSink", "render_text", "slack_message"]

# Block Kit limits (characters): header text, section text, one field, fallback text.
_HEADER_CHARS = 150
_SECTION_CHARS = 3000
_FIELD_CHARS = 2000
_CODE_CHARS = 1200
_ICONS = {"analyzed": ":mag:", "recurrence": ":repeat:", "heuristic": ":wrench:", "failed": ":warning:"}


def escape(text: str) -> str:
    """Slack's three control characters escaped, so untrusted text cannot mention or link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    """Untrusted text inside a code block: a triple backtick in it would end the block early."""
    return escape(text).replace("```", "`\u200b``")


def _prose(text: str) -> str:
    """Escaped text, with quoted source lines in a code block."""
    chunks = prose_and_code(text)
    return "\n".join(f"```\n{_code(chunk)}\n```" if is_code else escape(chunk) for is_code, chunk in chunks)


def _link(url: str | None, label: str) -> str:
    return f"<{url}|{escape(label)}>" if url else escape(label)


def _mrkdwn(text: str) -> dict[str, str]:
    return {"type": "mrkdwn", "text": text}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": _mrkdwn(clip(text, _SECTION_CHARS))}


def _field(label: str, value: str) -> dict[str, str]:
    return _mrkdwn(clip(f"*{label}*\n{value}", _FIELD_CHARS))


def _facts(notice: Notice, links: SourceLinks) -> dict[str, Any]:
    burst = notice.cluster
    server = escape(notice.server) + (f" (tenant {escape(burst.tenant)})" if burst.tenant else "")
    fields = [
        _field("Server", server),
        _field("Events", escape(span_text(burst))),
        _field("Exception", f"`{escape(burst.exception_type or 'unknown')}`"),
        _field("Analysis", f"{escape(judged(notice))}, confidence {notice.confidence:.2f}"),
    ]
    if notice.commit:
        fields.append(_field("Commit", _link(links.commit(notice.server, notice.commit), notice.commit[:10])))
    return {"type": "section", "fields": fields}


def _culprit(notice: Notice, links: SourceLinks) -> str | None:
    culprit = notice.culprit
    if culprit is None:
        return None
    url = links.source(notice.server, notice.commit, culprit.path, culprit.line)
    text = "*Culprit* " + _link(url, place(culprit))
    return text + (f" in `{escape(culprit.function)}`" if culprit.function else "")


def _fix(notice: Notice) -> str | None:
    fix = notice.fix
    if fix is None:
        return None
    text = f"*Suggested fix* in `{escape(fix.path)}`"
    if fix.explanation:
        text += "\n" + escape(fix.explanation)
    if fix.before or fix.after:
        diff = [*(f"- {line}" for line in fix.before.splitlines()), *(f"+ {line}" for line in fix.after.splitlines())]
        text += "\n```\n" + clip(_code("\n".join(diff)), _CODE_CHARS) + "\n```"
    return text


def _history(notice: Notice) -> str:
    parts = []
    if notice.recurrence_of:
        parts.append(f"Recurrence of analysis `{escape(notice.recurrence_of)}`")
    cases = []
    for case in notice.past_cases[:5]:
        text = f"`{escape(case.memory_id[:8])}` {case.score:.2f}"
        extras = [word for word in (case.verdict, "stale" if case.stale else None) if word]
        cases.append(text + (f" ({escape(', '.join(extras))})" if extras else ""))
    parts.append("Past cases: " + (", ".join(cases) if cases else "none"))
    return " · ".join(parts)


def slack_message(notice: Notice, links: SourceLinks) -> dict[str, Any]:
    """The incoming-webhook payload for `notice`: Block Kit blocks and the notification's fallback text."""
    icon = _ICONS.get(notice.status, ":grey_question:")
    title = clip(f"{icon} {headline(notice)}", _HEADER_CHARS)
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": title, "emoji": True}},
        _facts(notice, links),
    ]
    culprit = _culprit(notice, links)
    if culprit:
        blocks.append(_section(culprit))
    if notice.status == "failed":
        blocks.append(_section("*Analysis failed*: " + escape(notice.failure_reason or "no reason given")))
    if notice.root_cause:
        blocks.append(_section("*Root cause*\n" + _prose(notice.root_cause)))
    fix = _fix(notice)
    if fix:
        blocks.append(_section(fix))
    blocks.append({"type": "context", "elements": [_mrkdwn(_history(notice))]})
    blocks.append({"type": "context", "elements": [_mrkdwn(f"Log Agent analysis `{escape(notice.analysis_id)}`")]})
    where = f": {place(notice.culprit)}" if notice.culprit else ""
    fallback = f"{headline(notice)}, {notice.cluster.count} events{where}"
    return {"text": escape(clip(fallback, _HEADER_CHARS * 2)), "blocks": blocks}


class SlackSink:
    """Posts each analysis to one incoming webhook."""

    name = "slack"

    def __init__(self, client: httpx.AsyncClient, webhook_url: str, links: SourceLinks) -> None:
        self._client = client
        self._url = webhook_url
        self._links = links

    async def deliver(self, notice: Notice, raw: bytes) -> Outcome:
        """Post the message; Slack answers 200 `ok`, or a status and a short error code as plain text."""
        await request(self._client.post, self._url, json=slack_message(notice, self._links))
        return Outcome.DELIVERED


# --- a faithful plain-text render of a Block Kit message (README, `logagent notify --preview`) ---------

_LINK = re.compile(r"<([^<>|]+)\|([^<>]*)>")
_LABEL = re.compile(r"^\*([^*\n]+)\*", re.MULTILINE)


def _plain(mrkdwn: str) -> str:
    text = _LABEL.sub(lambda m: f"{m.group(1)}:", mrkdwn)
    text = _LINK.sub(lambda m: f"{m.group(2)} <{m.group(1)}>", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def render_text(message: dict[str, Any]) -> str:
    """The message as a reader sees it in Slack, in plain text: one block after another, links spelt out."""
    out: list[str] = []
    for block in message.get("blocks", []):
        kind = block.get("type")
        if kind == "header":
            out += [block["text"]["text"], ""]
        elif kind == "section":
            for field in block.get("fields", []):
                label, _, value = _plain(field["text"]).partition("\n")
                out.append(f"{label:<11} {value}")
            if "text" in block:
                out.append(_plain(block["text"]["text"]))
            out.append("")
        elif kind == "context":
            out += [_plain(element["text"]) for element in block.get("elements", [])]
    return "\n".join(out).rstrip() + "\n"
