"""Standard Webhooks signatures, checked against an independent computation."""

from __future__ import annotations

import base64
import hashlib
import hmac

from consumer.notify.webhook import signature, signing_key


class TestSignature:
    def test_matches_the_standard_construction(self) -> None:
        """v1,base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}"))."""
        key = b"k" * 24
        body = b'{"id":"a1"}'
        expected = base64.b64encode(hmac.new(key, b"a1.1700000000." + body, hashlib.sha256).digest()).decode()
        assert signature(key, "a1", 1_700_000_000, body) == f"v1,{expected}"

    def test_a_changed_body_or_id_changes_the_signature(self) -> None:
        """The signature covers id, timestamp and body."""
        base = signature(b"key", "a1", 1, b"x")
        assert len({base, signature(b"key", "a2", 1, b"x"), signature(b"key", "a1", 2, b"x"),
                    signature(b"key", "a1", 1, b"y")}) == 4

    def test_whsec_secrets_are_base64(self) -> None:
        """`whsec_<base64>` decodes to its key bytes; any other secret is used as its UTF-8 bytes."""
        assert signing_key("whsec_" + base64.b64encode(b"raw key").decode()) == b"raw key"
        assert signing_key("plain secret") == b"plain secret"
