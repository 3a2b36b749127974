"""Checks shared by the tests that redact what real programs print."""

from __future__ import annotations

from analysis.intake.redact import Redactor

REDACTOR = Redactor()


def redacted(text: str, *secrets: str) -> str:
    """`text` redacted, after checking that it held each secret (so the test shows them removed, not absent
    from the start); the prefilter's result must equal every rule's, and no word of a secret may remain."""
    for secret in secrets:
        assert secret in text, f"the program no longer prints {secret!r}: {text}"
    out = REDACTOR.redact(text)
    assert out == REDACTOR.every_rule(text)
    for secret in secrets:
        for word in (secret, *secret.split()):
            assert word not in out, out
    return out


def redact_anew(text: str) -> str:
    """`text` redacted by a new redactor, whose caches no earlier run filled (for timing)."""
    return Redactor().redact(text)
