"""`masked_url`: the userinfo of a URL (password and user name, which may be a token) never shows."""

from __future__ import annotations

import pytest

from consumer.settings import masked_url


class TestMaskedUrl:
    @pytest.mark.parametrize(("text", "shown"), [
        ("http://admin:p@ssw0rd@ollama:11434", "http://***@ollama:11434"),  # up to the last `@`
        ("http://ghp_Tok3nSecretValue@ollama:11434", "http://***@ollama:11434"),  # a token as the user name
        ("http://admin:pass word@ollama:11434", "http://***@ollama:11434"),
        ("http://admin:abc/def+gh=@ollama:11434/api", "http://***@ollama:11434/api"),  # `/` in the password
        ("lancedb s3://key:secret@bucket/x and http://u:p@ollama:11434",
         "lancedb s3://***@bucket/x and http://***@ollama:11434"),  # each URL of a text
    ])
    def test_all_userinfo_is_masked(self, text: str, shown: str) -> None:
        assert masked_url(text) == shown

    @pytest.mark.parametrize("text", ["http://ollama:11434/api", "kafka-0:9092,kafka-1:9092", "bob@example.com",
                                      "/var/lib/logagent/memory"])
    def test_text_without_userinfo_is_kept(self, text: str) -> None:
        assert masked_url(text) == text
