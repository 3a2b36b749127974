"""A generic webhook: the CloudEvent as JSON, signed the Standard Webhooks way, keyed by the analysis id.

Headers: `webhook-id` (the analysis id, the receiver's idempotency key; also sent as `Idempotency-Key`),
`webhook-timestamp` (Unix seconds) and `webhook-signature: v1,<base64 HMAC-SHA256>` over
`"{id}.{timestamp}.{body}"`. The body is the event exactly as it was read from the analyses topic, so a
receiver sees every field and extension the producer wrote. A 409 answer means the receiver already had
this id, and counts as a duplicate, not a failure.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

import httpx

from consumer.notify.notice import Notice
from consumer.notify.transport import Outcome, check, request

__all__ = ["WebhookSink", "signature", "signing_key"]

_SECRET_PREFIX = "whsec_"  # noqa: S105 - the prefix Standard Webhooks secrets carry, not a secret


def signing_key(secret: str) -> bytes:
    """The HMAC key: a `whsec_` secret is base64 (as Standard Webhooks libraries issue it), else its bytes."""
    if secret.startswith(_SECRET_PREFIX):
        return base64.b64decode(secret.removeprefix(_SECRET_PREFIX))
    return secret.encode()


def signature(key: bytes, message_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` value of one delivery."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def _check(response: httpx.Response) -> httpx.Response:
    return response if response.status_code == 409 else check(response)


class WebhookSink:
    """POSTs each event to one URL, signed."""

    name = "webhook"

    def __init__(self, client: httpx.AsyncClient, url: str, secret: str) -> None:
        self._client = client
        self._url = url
        self._key = signing_key(secret)

    async def deliver(self, notice: Notice, raw: bytes) -> Outcome:
        """Send the event; a fresh timestamp and signature on every try."""
        stamp = int(time.time())
        headers = {
            "content-type": "application/cloudevents+json; charset=utf-8",
            "webhook-id": notice.analysis_id,
            "webhook-timestamp": str(stamp),
            "webhook-signature": signature(self._key, notice.analysis_id, stamp, raw),
            "idempotency-key": notice.analysis_id,
        }
        response = await request(self._client.post, self._url, content=raw, headers=headers, checker=_check)
        return Outcome.DUPLICATE if response.status_code == 409 else Outcome.DELIVERED
