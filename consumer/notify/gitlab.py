"""GitLab issues over the REST API (v4): `PRIVATE-TOKEN` auth, project ids or URL-encoded paths.

GitLab answers 429 with `Retry-After` when a rate limit is hit (the shared `check` handles it); issues are
addressed by their project-scoped `iid`, comments are "notes", and pages follow `x-next-page`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from consumer.notify.tracker import Issue
from consumer.notify.transport import DeliveryError, json_body, new_client, request

__all__ = ["GitLabApi"]

_PAGE = 100
_MAX_NOTE_PAGES = 50


def _issue(doc: Any) -> Issue:
    if not isinstance(doc, dict) or not isinstance(doc.get("iid"), int):
        raise DeliveryError("bad_response", "GitLab answered without an issue iid", retriable=True)
    closed = doc.get("state") == "closed"
    return Issue(number=doc["iid"], body=doc.get("description") or "", url=str(doc.get("web_url", "")),
                 labels=frozenset(str(label) for label in doc.get("labels", [])), closed=closed, reopenable=closed)


class GitLabApi:
    """The issue and note endpoints of one GitLab instance."""

    name = "gitlab"

    def __init__(self, api_url: str, token: str, timeout_s: float) -> None:
        self._root = api_url.rstrip("/")
        self._client = new_client(timeout_s, {"private-token": token, "user-agent": "logagent-notify"})

    def _url(self, project: str, *parts: str | int) -> str:
        path = "/".join(str(part) for part in parts)
        return f"{self._root}/projects/{quote(project, safe='')}/{path}"

    async def _call(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        return await request(self._client.request, method, url, **kwargs)

    async def find(self, target: str, label: str) -> Issue | None:
        """The oldest issue with `label`, open or closed (no `state` filter lists both)."""
        params = {"labels": label, "order_by": "created_at", "sort": "asc", "per_page": 10}
        response = await self._call("GET", self._url(target, "issues"), params=params)
        found = [doc for doc in json_body(response) if isinstance(doc, dict)]
        return _issue(found[0]) if found else None

    async def create(self, target: str, title: str, body: str, labels: Sequence[str]) -> Issue:
        """POST an issue; GitLab creates labels that do not exist yet."""
        response = await self._call("POST", self._url(target, "issues"),
                                    json={"title": title, "description": body, "labels": ",".join(labels)})
        return _issue(json_body(response))

    async def comments(self, target: str, number: int) -> AsyncIterator[str]:
        """Note bodies (system notes included, they never carry a marker), page by page."""
        page: str | None = "1"
        for _ in range(_MAX_NOTE_PAGES):
            if not page:
                return
            response = await self._call("GET", self._url(target, "issues", number, "notes"),
                                        params={"per_page": _PAGE, "page": page, "sort": "asc"})
            for doc in json_body(response):
                if isinstance(doc, dict):
                    yield str(doc.get("body") or "")
            page = response.headers.get("x-next-page") or None
        raise DeliveryError("too_many_comments", f"issue {number} has over {_PAGE * _MAX_NOTE_PAGES} notes",
                            retriable=False)

    async def comment(self, target: str, number: int, body: str) -> None:
        """POST a note."""
        await self._call("POST", self._url(target, "issues", number, "notes"), json={"body": body})

    async def reopen(self, target: str, number: int) -> None:
        """PUT `state_event=reopen`."""
        await self._call("PUT", self._url(target, "issues", number), json={"state_event": "reopen"})

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()
