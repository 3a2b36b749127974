"""A webhook receiver that checks deliveries the way a Standard Webhooks consumer does.

Each POST must carry `webhook-id`, `webhook-timestamp` and `webhook-signature` (`v1,<base64>` of
HMAC-SHA256 over `"{id}.{timestamp}.{body}"` with the shared secret, verified here with the standard
library, not with the code under test) and a timestamp within five minutes; otherwise `401`. Accepted
deliveries are kept by id; with `conflict_on_replay` a repeated id is answered `409 Conflict`, as
receivers that enforce idempotency keys do.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import ClassVar

from tests.protocol_server import ProtocolServer, Request, Response

_TOLERANCE_S = 300


class WebhookReceiver(ProtocolServer):
    """Receives signed CloudEvents at `/hooks/logagent`."""

    name: ClassVar[str] = "webhook-receiver"

    def __init__(self, secret: str = "whsec_" + base64.b64encode(b"notify-test-signing-key").decode(), *,
                 conflict_on_replay: bool = False, delay_s: float = 0.0) -> None:
        super().__init__(delay_s=delay_s)
        self.secret = secret
        self.conflict_on_replay = conflict_on_replay
        self.deliveries: list[tuple[str, bytes, dict[str, str]]] = []
        """(webhook-id, body, headers) of every accepted delivery, replays included."""

    @property
    def hook_url(self) -> str:
        """The endpoint to configure."""
        return self.url + "/hooks/logagent"

    def _key(self) -> bytes:
        return base64.b64decode(self.secret.removeprefix("whsec_"))

    def verify(self, request: Request) -> bool:
        """Whether the request is signed with the secret, recently."""
        message_id = request.headers.get("webhook-id", "")
        stamp = request.headers.get("webhook-timestamp", "")
        if not message_id or not stamp.isdigit() or abs(time.time() - int(stamp)) > _TOLERANCE_S:
            return False
        expected = hmac.new(self._key(), f"{message_id}.{stamp}.".encode() + request.body, hashlib.sha256).digest()
        offered = [part.split(",", 1)[1] for part in request.headers.get("webhook-signature", "").split()
                   if part.startswith("v1,")]
        return any(hmac.compare_digest(base64.b64decode(sig), expected) for sig in offered)

    def route(self, request: Request) -> Response:
        if request.method != "POST" or request.path != "/hooks/logagent":
            return Response.text(404, "not found")
        if not self.verify(request):
            return Response.text(401, "bad signature")
        message_id = request.headers["webhook-id"]
        if self.conflict_on_replay and any(seen == message_id for seen, _, _ in self.deliveries):
            return Response.text(409, "already received")
        self.deliveries.append((message_id, request.body, dict(request.headers)))
        return Response.text(204, "")
