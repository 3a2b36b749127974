"""GitHub issues over the REST API (v3, `X-GitHub-Api-Version: 2022-11-28`).

Rate limits: GitHub answers 403 or 429 when a limit is hit. A secondary limit sends `retry-after`; the
primary limit sends `x-ratelimit-remaining: 0` and `x-ratelimit-reset` (Unix seconds). Both are retried
after the time GitHub asks for; any other 403 (no access) is permanent.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from consumer.notify.tracker import Issue
from consumer.notify.transport import DeliveryError, check, json_body, new_client, request, retry_after_s

__all__ = ["GitHubApi", "github_check"]

_PAGE = 100
_MAX_COMMENT_PAGES = 50


def github_check(response: httpx.Response) -> httpx.Response:
    """`check`, plus GitHub's 403 rate-limit answers turned into retriable errors with their wait."""
    if response.status_code in (403, 429):
        headers = response.headers
        wait = retry_after_s(headers)
        if wait is None and headers.get("x-ratelimit-remaining") == "0":
            reset = headers.get("x-ratelimit-reset", "")
            wait = max(0.0, float(reset) - time.time()) if reset.isdigit() else None
        if wait is not None:
            detail = f"HTTP {response.status_code}: {response.text[:200]}"
            raise DeliveryError("rate_limited", detail, retriable=True, retry_after=wait)
    return check(response)


def _issue(doc: Any) -> Issue:
    if not isinstance(doc, dict) or not isinstance(doc.get("number"), int):
        raise DeliveryError("bad_response", "GitHub answered without an issue number", retriable=True)
    labels = frozenset(label["name"] if isinstance(label, dict) else str(label) for label in doc.get("labels", []))
    closed = doc.get("state") == "closed"
    return Issue(number=doc["number"], body=doc.get("body") or "", url=str(doc.get("html_url", "")),
                 labels=labels, closed=closed, reopenable=closed and doc.get("state_reason") != "not_planned")


class GitHubApi:
    """The issue and comment endpoints of one GitHub (github.com or an Enterprise server)."""

    name = "github"

    def __init__(self, api_url: str, token: str, timeout_s: float) -> None:
        self._root = api_url.rstrip("/")
        self._client = new_client(timeout_s, {
            "authorization": f"Bearer {token}",
            "accept": "application/vnd.github+json",
            "x-github-api-version": "2022-11-28",
            "user-agent": "logagent-notify",
        })

    def _url(self, repo: str, *parts: str | int) -> str:
        owner, _, name = repo.partition("/")
        path = "/".join(str(part) for part in parts)
        return f"{self._root}/repos/{quote(owner, safe='')}/{quote(name, safe='')}/{path}"

    async def _call(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        return await request(self._client.request, method, url, checker=github_check, **kwargs)

    async def find(self, target: str, label: str) -> Issue | None:
        """The oldest issue with `label`; pull requests (which the endpoint also lists) are skipped."""
        params = {"labels": label, "state": "all", "sort": "created", "direction": "asc", "per_page": 10}
        response = await self._call("GET", self._url(target, "issues"), params=params)
        found = [doc for doc in json_body(response) if isinstance(doc, dict) and "pull_request" not in doc]
        return _issue(found[0]) if found else None

    async def create(self, target: str, title: str, body: str, labels: Sequence[str]) -> Issue:
        """POST an issue; GitHub creates labels that do not exist yet."""
        response = await self._call("POST", self._url(target, "issues"),
                                    json={"title": title, "body": body, "labels": list(labels)})
        return _issue(json_body(response))

    async def comments(self, target: str, number: int) -> AsyncIterator[str]:
        """Comment bodies, following the `Link: rel="next"` pages."""
        url: str | None = self._url(target, "issues", number, "comments")
        params: dict[str, Any] | None = {"per_page": _PAGE}
        for _ in range(_MAX_COMMENT_PAGES):
            if url is None:
                return
            response = await self._call("GET", url, params=params)
            for doc in json_body(response):
                if isinstance(doc, dict):
                    yield str(doc.get("body") or "")
            url = response.links.get("next", {}).get("url")
            params = None  # the next link carries its own query
        raise DeliveryError("too_many_comments", f"issue #{number} has over {_PAGE * _MAX_COMMENT_PAGES} "
                            "comments", retriable=False)

    async def comment(self, target: str, number: int, body: str) -> None:
        """POST a comment."""
        await self._call("POST", self._url(target, "issues", number, "comments"), json={"body": body})

    async def reopen(self, target: str, number: int) -> None:
        """PATCH the issue open."""
        await self._call("PATCH", self._url(target, "issues", number), json={"state": "open"})

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()
