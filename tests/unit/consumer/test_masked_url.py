"""`masked_url`: the userinfo of a URL (password and user name, which may be a token) and query parameters
named like a secret never show."""

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

    @pytest.mark.parametrize(("text", "shown"), [
        ("http://ollama:11434/?api_key=abc123&model=x", "http://ollama:11434/?api_key=***&model=x"),
        ("s3://bucket/memory?region=eu-1&aws_secret_access_key=wJalr", "s3://bucket/memory?region=eu-1&aws_secret_access_key=***"),
        ("https://acct.blob/c?sv=2022&sig=abc%2Fdef#top", "https://acct.blob/c?sv=2022&sig=***#top"),
        ("https://h/p?X-Amz-Signature=dead&X-Amz-Date=20261205", "https://h/p?X-Amz-Signature=***&X-Amz-Date=20261205"),
        ("http://u:p@h/?access%5Ftoken=t", "http://***@h/?access%5Ftoken=***"),  # a percent-encoded name
        ("http://h/cb#access_token=t&state=1", "http://h/cb#access_token=***&state=1"),  # in the fragment
        ("http://h/?password=pa;ss&x=1", "http://h/?password=***&x=1"),  # `;` inside a value
        ("http://h/?pass=a&pw=b&passphrase=c&jwt=d&hmac=e&model=x", "http://h/?pass=***&pw=***&passphrase=***&jwt=***&hmac=***&model=x"),
    ])  # fmt: skip
    def test_a_query_parameter_named_like_a_secret_is_masked(self, text: str, shown: str) -> None:
        """Attacker review: `logagent config` and the start-up log showed `?api_key=` and
        `?aws_secret_access_key=` values of the Ollama URL and the memory URI."""
        assert masked_url(text) == shown

    @pytest.mark.parametrize("text", ["http://ollama:11434/api", "kafka-0:9092,kafka-1:9092", "bob@example.com",
                                      "/var/lib/logagent/memory"])
    def test_text_without_userinfo_is_kept(self, text: str) -> None:
        assert masked_url(text) == text
