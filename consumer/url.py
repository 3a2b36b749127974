"""The check every URL setting gets (Ollama, the memory's embedder, notify's sinks and APIs): an http(s)
URL with a host, so `LOGAGENT_OLLAMA_URL=notaurl` stops the start instead of failing at the first call."""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["http_url"]

_FORM = "write http://host:port or https://host/path"


def http_url(value: str) -> str:
    """`value` when it is an http or https URL with a host (and a valid port, if any) and no whitespace in
    it or around it (the settings keep the value as given, so a stray space or line break would reach the
    client); otherwise ValueError saying what is wrong, never quoting the value (a webhook URL is a
    secret). A pydantic AfterValidator."""
    if any(char.isspace() for char in value):
        raise ValueError(f"a URL with a space or line break inside or around it; {_FORM}")
    try:
        parts = urlsplit(value)
        port = parts.port  # parsing the port raises for `host:abc` or a port out of range
    except ValueError:  # its text quotes the port, which may be part of a secret
        raise ValueError(f"not a URL (its port or IPv6 address cannot be read); {_FORM}") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError(f"not an http(s) URL; {_FORM}")
    if not parts.hostname:
        raise ValueError(f"a URL without a host; {_FORM}")
    if port == 0:
        raise ValueError(f"a URL with port 0; {_FORM}")
    return value
