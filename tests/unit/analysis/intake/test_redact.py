"""Secrets and personal data become typed placeholders; ordinary trace text is left alone."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.event import ErrorEvent, ExceptionInfo, Frame
from analysis.intake.redact import KINDS, RedactionConfig, Redactor, redact_event
from tests.paths import TRACES

TRACES = TRACES
REDACTOR = Redactor()

# One sample per kind: (text, the secret that must disappear, the placeholder kind).
SAMPLES = [
    ("key id AKIAIOSFODNN7EXAMPLE in use", "AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
    ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG", "aws_secret_key"),
    ("push failed with ghp_0123456789abcdefghijklmnopqrstuvwxyzAB", "ghp_0123456789", "github_token"),
    ("clone github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github_pat_11ABC", "github_token"),
    ("oauth gho_ZYXWVUTSRQPONMLKJIHGFEDCBA9876543210 expired", "gho_ZYXW", "github_token"),
    ("slack call with xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp", "xoxb-1234567890", "slack_token"),
    ("Authorization: Bearer 8f2c1d0e9b7a6f5e4d3c2b1a", "8f2c1d0e9b7a6f5e4d3c2b1a", "bearer"),
    ("api_key=sk_live_51HqA9x2 sent", "sk_live_51HqA9x2", "secret"),
    ('{"password": "hunter2!", "user": "bob"}', "hunter2!", "secret"),
    ("token: 7d1e2f3a4b5c", "7d1e2f3a4b5c", "secret"),
    ("session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
     "eyJzdWIiOiIxMjM0NTY3ODkwIn0", "jwt"),
    ("connect postgres://app:s3cr3tP4ss@db.internal:5432/shop failed", "s3cr3tP4ss", "url_password"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
     "b3BlbnNzaC1rZXktdjEAAAAA", "private_key"),
    ("mail sent to bob.smith+orders@example.co.uk", "bob.smith+orders@example.co.uk", "email"),
    ("charged 4111 1111 1111 1111 twice", "4111 1111 1111 1111", "credit_card"),
    ("charged 5555555555554444 twice", "5555555555554444", "credit_card"),
    ("client 203.0.113.45 refused", "203.0.113.45", "ipv4"),
    ("client 2001:db8:85a3::8a2e:370:7334 refused", "2001:db8:85a3::8a2e:370:7334", "ipv6"),
]  # fmt: skip


class TestRedactor:
    @pytest.mark.parametrize(("text", "secret", "kind"), SAMPLES, ids=[sample[2] for sample in SAMPLES])
    def test_each_kind_is_replaced_by_its_placeholder(self, text: str, secret: str, kind: str) -> None:
        """The secret is gone and a placeholder naming its kind stands in its place."""
        redacted = REDACTOR.redact(text)
        assert secret not in redacted
        assert f"[REDACTED:{kind}]" in redacted

    def test_url_keeps_user_and_host(self) -> None:
        """Only the password of a URL is hidden: user, host and path stay useful for analysis."""
        assert REDACTOR.redact("redis://cache:pw123456@redis-0.svc:6379/0") == (
            "redis://cache:[REDACTED:url_password]@redis-0.svc:6379/0"
        )

    def test_card_numbers_failing_luhn_and_epoch_millis_stay(self) -> None:
        """Digit runs that are not valid card numbers (and millisecond timestamps) are not redacted."""
        text = "order 4111111111111112 at 1714644843551"
        assert REDACTOR.redact(text) == text

    def test_ordinary_traces_are_untouched(self) -> None:
        """Trace text (line numbers, versions, hex offsets, Go module versions, UUID-free) passes unchanged."""
        for name in ("java_checkout.txt", "python_pricing.txt", "go_panic.txt", "java_inventory.txt"):
            text = (TRACES / name).read_text()
            assert REDACTOR.redact(text) == text, name
        line = "\tat com.acme.auth.TokenValidator.validate(TokenValidator.java:42) spring-core 5.3.20 at 10:14:03"
        assert REDACTOR.redact(line) == line

    def test_disabled_kinds_and_switch(self) -> None:
        """Only the configured kinds run; `enabled=False` turns redaction off."""
        only_email = Redactor(RedactionConfig(kinds=("email",)))
        assert only_email.redact("bob@example.com 10.0.0.1") == "[REDACTED:email] 10.0.0.1"
        assert Redactor(RedactionConfig(enabled=False)).redact("bob@example.com") == "bob@example.com"
        with pytest.raises(ValueError, match="unknown redaction kinds"):
            Redactor(RedactionConfig(kinds=("email", "horoscope")))
        assert set(KINDS) >= {"aws_access_key", "github_token", "jwt", "url_password", "email", "credit_card"}

    def test_extra_patterns(self) -> None:
        """Company-specific patterns from the config are redacted under their own name."""
        redactor = Redactor(RedactionConfig(extra_patterns={"acme_ticket": r"ACME-[0-9]{6}"}))
        assert redactor.redact("see ACME-123456 now") == "see [REDACTED:acme_ticket] now"

    def test_hostile_input_stays_linear(self) -> None:
        """Long runs built to make backtracking regexes explode finish quickly."""
        hostile = [
            "a" * 200_000,
            "1 " * 100_000,
            "@" + "a." * 100_000,
            "x://" + "a" * 100_000,
            "password=" * 20_000,
            "eyJ" + "a" * 100_000 + "." * 3,
            "1:" * 100_000,
            "-----BEGIN RSA PRIVATE KEY-----" * 5_000,
        ]
        for text in hostile:
            started = time.perf_counter()
            REDACTOR.redact(text)
            assert time.perf_counter() - started < 1.0, text[:20]


# Pieces that exercise every rule, at line starts and ends, and secrets whose key and value sit on two lines.
_PIECES = [
    "\n", "\n  ", " ", "\t", ":", "=", '"', "'", ".", "@", "-", "password", "Token", "api_key", "secret",
    "credentials", "Bearer", "Authorization: Basic", "aws_secret_access_key", "AKIAIOSFODNN7EXAMPLE",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "hunter2", "10.0.3.7", "fe80::1", "2001:db8::8a2e:370:7334",
    "bob@example.com", "4111 1111 1111 1111", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl",
    "https://app:pw@db", "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB", "xoxb-1234567890-abc",
    "\tat com.acme.Key.get(Key.java:12)", "KeyError: 'currency'", "[REDACTED:secret]", "\r",
    "-----BEGIN RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEA", "-----END RSA PRIVATE KEY-----", "in synctoken",
]
_TEXTS = st.lists(st.sampled_from(_PIECES), max_size=24).map("".join)
# An extra pattern that never matches sends every text down the whole-text path: the reference.
_WHOLE_TEXT = Redactor(RedactionConfig(extra_patterns={"never": r"(?!x)x"}))
# One redactor across examples: lines seen before come from its cache, flagged or redacted.
_WARM = Redactor()


class TestLineByLine:
    @settings(max_examples=500, deadline=None)
    @given(text=_TEXTS)
    def test_line_by_line_redaction_equals_the_whole_text_pass(self, text: str) -> None:
        """Multi-line text redacted line by line (the fast path, cached per line) comes out exactly as one
        pass of every rule over the whole text, including key/value secrets split across a line break."""
        expected = _WHOLE_TEXT.redact(text)
        assert Redactor().redact(text) == expected
        assert _WARM.redact(text) == expected

    def test_a_secret_split_across_lines_is_redacted(self) -> None:
        """`password:` at the end of one line and the value on the next is still a secret, and so is
        `password` with its `:` on the next line."""
        for split in ("password:\n  hunter2", "password\n  : hunter2"):
            text = f"config dump\n{split}\n\tat com.acme.Config.load(Config.java:12)"
            assert "hunter2" not in Redactor().redact(text), split

    def test_a_line_that_only_looks_like_a_split_secret_hides_nothing(self) -> None:
        """A frame ending in `token` may start a secret that goes on into the next line. When the next
        line shows it does not, nothing is hidden, under any header and however often it repeats; when
        the next lines hold `=` and a value, the value is."""
        redactor = Redactor()
        text = '  File "/app/auth.py", line 57, in refresh_token\n    return self.store.load(user_id)'
        assert redactor.redact(text) == text
        headed = redactor.redact(f"ValueError: for bob@example.com\n{text}")
        assert headed == f"ValueError: for [REDACTED:email]\n{text}"
        assert redactor.redact(f"{text}\ntoken=\n s3cr3t") == f"{text}\ntoken=\n [REDACTED:secret]"

    def test_repeated_trace_lines_come_from_the_cache(self) -> None:
        """A trace seen again under a new first line reuses its redacted lines."""
        redactor = Redactor()
        frames = (TRACES / "java_inventory.txt").read_text().partition("\n")[2]
        redactor.redact(f"java.lang.IllegalStateException: order 1 from bob@example.com\n{frames}")
        cached = len(redactor._lines)
        second = redactor.redact(f"java.lang.IllegalStateException: order 2 from eve@example.com\n{frames}")
        assert len(redactor._lines) == cached + 1 and "[REDACTED:email]" in second


class TestRedactEvent:
    def test_every_text_field_is_redacted(self) -> None:
        """Message, exception values, raw trace and string extras (also under secret-named keys)."""
        frames = (Frame("login", "/srv/app/auth.py", lineno=9),)
        event = ErrorEvent(
            server_id="auth", timestamp=0.0, message="login failed for bob@example.com",
            exceptions=(ExceptionInfo("AuthError", "token=abc123def rejected", frames),),
            raw_trace="AuthError: token=abc123def rejected",
            extra={"client": {"ip": "198.51.100.7"}, "db_password": "plain", "tags": ["carol@example.org"]},
        )  # fmt: skip
        redacted = redact_event(event, REDACTOR)
        assert redacted.message == "login failed for [REDACTED:email]"
        assert redacted.exceptions[0].value == "token=[REDACTED:secret] rejected"
        assert redacted.exceptions[0].frames is frames
        assert redacted.raw_trace == "AuthError: token=[REDACTED:secret] rejected"
        assert redacted.extra == {"client": {"ip": "[REDACTED:ipv4]"}, "db_password": "[REDACTED:secret]",
                                  "tags": ["[REDACTED:email]"]}  # fmt: skip
        assert event.message == "login failed for bob@example.com"  # the original is not modified

    def test_clean_chain_is_kept_as_is(self) -> None:
        """A chain with nothing to redact is the same object, so fingerprint caches keep hitting."""
        chain = (ExceptionInfo("KeyError", "'qty'"),)
        event = ErrorEvent(server_id="s", timestamp=0.0, message="m", exceptions=chain)
        assert redact_event(event, REDACTOR).exceptions is chain
