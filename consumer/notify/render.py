"""What every sink's message shares: links to the code at the commit, the burst's span, bounded text."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote, urlsplit, urlunsplit

from consumer.notify.notice import Burst, Notice, Place

__all__ = ["SourceLinks", "clip", "headline", "judged", "place", "prose_and_code", "span_text", "utc_text",
           "web_url"]

_NUMBERED_LINE = re.compile(r"^\s*\d+\|")
_SCP_LIKE = re.compile(r"^(?:[\w.-]+@)?(?P<host>[\w.-]+):(?P<path>(?!/)[^\s]+)$")


def web_url(git_url: str) -> str | None:
    """The browsable https URL of a git remote (https or ssh), credentials dropped; None for local repos."""
    scp = _SCP_LIKE.match(git_url)
    if scp and "://" not in git_url:
        return f"https://{scp['host']}/{scp['path'].removesuffix('.git').strip('/')}"
    parts = urlsplit(git_url)
    if parts.scheme not in ("https", "http", "ssh", "git") or not parts.hostname:
        return None
    host = parts.hostname + (f":{parts.port}" if parts.port and parts.scheme in ("https", "http") else "")
    scheme = "http" if parts.scheme == "http" else "https"
    return urlunsplit((scheme, host, parts.path.removesuffix(".git").rstrip("/"), "", ""))


@dataclass(frozen=True)
class SourceLinks:
    """Links into each server's repository on its git host, from two URL templates."""

    repos: Mapping[str, str]
    """Server id -> web URL of its repository."""
    source_template: str = "{repo}/blob/{commit}/{path}#L{line}"
    commit_template: str = "{repo}/commit/{commit}"

    def source(self, server: str, commit: str | None, path: str, line: int | None) -> str | None:
        """The URL of `path` (at `line`) at `commit`, or None without a known repository or commit."""
        repo = self.repos.get(server)
        if repo is None or not commit:
            return None
        template = self.source_template if line is not None else self.source_template.split("#", 1)[0]
        return template.format(repo=repo, commit=quote(commit), path=quote(path.lstrip("/")), line=line)

    def commit(self, server: str, commit: str | None) -> str | None:
        """The URL of `commit`, or None."""
        repo = self.repos.get(server)
        if repo is None or not commit:
            return None
        return self.commit_template.format(repo=repo, commit=quote(commit))

    def check(self) -> None:
        """Raise KeyError or ValueError now when a template names an unknown field."""
        self.source_template.format(repo="r", commit="c", path="p", line=1)
        self.commit_template.format(repo="r", commit="c")


def utc_text(ts: float) -> str:
    """An event time as `2024-07-03 09:46:40 UTC` ("unknown time" past what a calendar can print)."""
    try:
        return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, ValueError, OSError):
        return "unknown time"


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"


def span_text(burst: Burst) -> str:
    """`224 events in 3m 12s, from 2024-07-03 09:46:40 UTC`."""
    events = "1 event" if burst.count == 1 else f"{burst.count} events"
    return f"{events} in {_duration(burst.last_seen - burst.first_seen)}, from {utc_text(burst.first_seen)}"


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def headline(notice: Notice) -> str:
    """`NumberFormatException on checkout-service`: the short name of the failure and where."""
    short = notice.cluster.exception_type.rsplit(".", 1)[-1] or "Error"
    return f"{short} on {notice.server}"


def place(culprit: Place) -> str:
    """`path:line` (or the path alone when the line is unknown)."""
    return culprit.path + (f":{culprit.line}" if culprit.line else "")


_ANALYZERS = {"llm": "the LLM", "heuristic": "the heuristic localiser", "memory": "the error memory"}


def judged(notice: Notice) -> str:
    """`analyzed, by the LLM (qwen2.5-coder:7b)`: what the analysis is and what made it."""
    who = _ANALYZERS.get(notice.analyzer, notice.analyzer or "an unknown analyzer")
    return f"{notice.status}, by {who}" + (f" ({notice.model})" if notice.model else "")


def prose_and_code(text: str) -> list[tuple[bool, str]]:
    """`text` split into (is_code, chunk): runs of numbered source lines (`12| code`), as the localiser
    quotes them, become code so each sink can set them in monospace."""
    chunks: list[tuple[bool, list[str]]] = []
    for line in text.splitlines():
        is_code = bool(_NUMBERED_LINE.match(line))
        if chunks and chunks[-1][0] == is_code:
            chunks[-1][1].append(line)
        else:
            chunks.append((is_code, [line]))
    return [(is_code, "\n".join(lines).strip("\n")) for is_code, lines in chunks if "".join(lines).strip()]
