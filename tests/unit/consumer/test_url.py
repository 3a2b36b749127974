"""URL settings hold http(s) URLs with a host; what is wrong is said without quoting the value."""

from __future__ import annotations

import pytest

from consumer.url import http_url


class TestHttpUrl:
    @pytest.mark.parametrize("url", ["http://ollama:11434", "https://api.github.com", "HTTPS://gitlab.example/api/v4",
                                     "http://[::1]:8080/", "http://127.0.0.1:11434"])
    def test_http_and_https_urls_with_a_host_pass_unchanged(self, url: str) -> None:
        assert http_url(url) == url

    @pytest.mark.parametrize("url", ["http://admin:pass word@ollama:11434", "http://ollama:11434/a\tb",
                                     "http://ollama\n:11434", " http://ollama:11434", "http://ollama:11434\n"])
    def test_whitespace_inside_is_refused(self, url: str) -> None:
        with pytest.raises(ValueError, match="space or line break inside") as raised:
            http_url(url)
        assert "pass" not in str(raised.value)

    @pytest.mark.parametrize(("url", "reason"), [
        ("notaurl", "not an http(s) URL"), ("ollama:11434", "not an http(s) URL"),
        ("ftp://ollama", "not an http(s) URL"),
        ("http://", "without a host"), ("https:///path", "without a host"), ("http://ollama:0", "port 0"),
        ("http://ollama:99999", "its port"), ("http://ollama:port", "its port"), ("http://[::1", "IPv6"),
    ])
    def test_anything_else_says_what_is_wrong_and_how_to_write_it(self, url: str, reason: str) -> None:
        with pytest.raises(ValueError, match="write http://host:port or https://host/path") as raised:
            http_url(url)
        assert reason in str(raised.value)

    def test_the_message_never_quotes_the_value(self) -> None:
        """A webhook URL carries its token; not even the unreadable port of one is quoted."""
        with pytest.raises(ValueError) as raised:
            http_url("https://hooks.example:T0KEN-abc/services")
        assert "T0KEN" not in str(raised.value)
