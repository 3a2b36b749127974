"""A server that speaks Slack's incoming-webhook protocol, for driving `logagent notify`'s Slack sink.

`POST /services/T.../B.../<secret>` with a JSON body of `text` and/or Block Kit `blocks`. Slack answers
`200 ok` as plain text, or a status with a short error code as plain text: `400 invalid_payload` (not
JSON), `400 no_text` (neither text nor blocks), `400 invalid_blocks` (a block breaks a Block Kit limit),
`404 no_service` (unknown or revoked webhook), `410 channel_is_archived`, `429` with `Retry-After` when
rate-limited, `500 rollup_error`. The limits checked are Slack's documented ones: at most 50 blocks, a
header's plain text up to 150 characters, a section's text up to 3000, at most 10 fields of 2000 each.

    with SlackWebhook() as slack:
        ... LOGAGENT_NOTIFY__SLACK__WEBHOOK_URL=slack.webhook_url ...
        assert slack.messages[0]["blocks"][0]["type"] == "header"
"""

from __future__ import annotations

from typing import Any, ClassVar

from tests.protocol_server import ProtocolServer, Request, Response

_HOOK_PATH = "/services/T0LOGAGENT/B0NOTIFY/s3cr3tWebhookToken"
_LIMITS = {"blocks": 50, "header": 150, "section": 3000, "fields": 10, "field": 2000, "context": 10}


def block_errors(payload: Any) -> list[str]:
    """Why Slack would refuse `payload` as a message (empty when it accepts it)."""
    if not isinstance(payload, dict):
        return ["not an object"]
    blocks = payload.get("blocks", [])
    errors = [] if payload.get("text") or blocks else ["no_text"]
    if not isinstance(blocks, list) or len(blocks) > _LIMITS["blocks"]:
        return [*errors, "too many blocks"]
    for index, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, dict) else None
        text = block.get("text", {}) if isinstance(block, dict) else {}
        if kind == "header":
            if text.get("type") != "plain_text" or not 0 < len(text.get("text", "")) <= _LIMITS["header"]:
                errors.append(f"block {index}: header needs plain_text of 1-150 characters")
        elif kind == "section":
            fields = block.get("fields", [])
            if "text" not in block and not fields:
                errors.append(f"block {index}: section without text or fields")
            if "text" in block and not 0 < len(text.get("text", "")) <= _LIMITS["section"]:
                errors.append(f"block {index}: section text must be 1-3000 characters")
            if len(fields) > _LIMITS["fields"] or any(len(f.get("text", "")) > _LIMITS["field"] for f in fields):
                errors.append(f"block {index}: at most 10 fields of 2000 characters")
        elif kind == "context":
            elements = block.get("elements", [])
            if not 0 < len(elements) <= _LIMITS["context"]:
                errors.append(f"block {index}: context needs 1-10 elements")
        elif kind != "divider":
            errors.append(f"block {index}: unknown type {kind!r}")
    return errors


class SlackWebhook(ProtocolServer):
    """One incoming webhook; `messages` are the payloads Slack accepted, in order."""

    name: ClassVar[str] = "slack-webhook"

    def __init__(self, *, delay_s: float = 0.0) -> None:
        super().__init__(delay_s=delay_s)
        self.messages: list[dict[str, Any]] = []
        self.archived = False

    @property
    def webhook_url(self) -> str:
        """The secret URL a workspace admin would copy from Slack."""
        return self.url + _HOOK_PATH

    def route(self, request: Request) -> Response:
        if request.method != "POST" or request.path != _HOOK_PATH:
            return Response.text(404, "no_service")
        if self.archived:
            return Response.text(410, "channel_is_archived")
        payload = request.json()
        if payload is None:
            return Response.text(400, "invalid_payload")
        errors = block_errors(payload)
        if errors == ["no_text"]:
            return Response.text(400, "no_text")
        if errors:
            return Response.text(400, "invalid_blocks")
        self.messages.append(payload)
        return Response.text(200, "ok")
