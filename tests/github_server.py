"""A server that speaks GitHub's REST API for issues and comments, for driving the GitHub issue sink.

What it implements, as GitHub documents it (API version 2022-11-28):
- `GET /repos/{owner}/{repo}/issues` with `labels` (comma-separated, all must match), `state`
  (`open` by default, `closed`, `all`), `sort=created`, `direction`, `per_page` (max 100) and `page`,
  with a `Link` header to the next page;
- `POST /repos/{owner}/{repo}/issues` (`title` required, else `422 Validation Failed`; labels that do not
  exist are created, or silently dropped when the token may not set labels: `drop_labels`);
- `GET|PATCH /repos/{owner}/{repo}/issues/{number}` (`state`, `state_reason`);
- `GET|POST /repos/{owner}/{repo}/issues/{number}/comments`, paginated the same way;
- `401 Bad credentials` without the right `Authorization: Bearer` (or `token`) header, `404 Not Found`
  for an unknown repository or issue;
- the primary rate limit on every response (`x-ratelimit-limit`, `-remaining`, `-used`, `-reset`,
  `-resource`), and once it is spent `403 API rate limit exceeded` with `x-ratelimit-remaining: 0` until
  the reset time. Secondary limits (`403` or `429` with `retry-after`) are injected as faults.
"""

from __future__ import annotations

import itertools
import re
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tests.protocol_server import ProtocolServer, Request, Response

_DOCS = "https://docs.github.com/rest"
_ISSUES = re.compile(r"^/repos/(?P<repo>[^/]+/[^/]+)/issues(?:/(?P<number>\d+)(?P<comments>/comments)?)?$")


@dataclass
class StoredIssue:
    """An issue as the tracker keeps it (shared by the GitHub and GitLab servers)."""

    number: int
    title: str
    body: str
    labels: list[str]
    state: str = "open"
    state_reason: str | None = None
    comments: list[str] = field(default_factory=list)
    created: int = 0


class GitHubServer(ProtocolServer):
    """Repositories with issues; `token` is the only credential accepted."""

    name: ClassVar[str] = "github-api"

    def __init__(self, repos: tuple[str, ...] = ("acme/checkout",), *, token: str = "ghp_notifyTestToken",
                 rate_limit: int = 5000, rate_window_s: float = 3600.0, delay_s: float = 0.0) -> None:
        super().__init__(delay_s=delay_s)
        self.token = token
        self.repos: dict[str, list[StoredIssue]] = {repo: [] for repo in repos}
        self.drop_labels = False
        self._limit = rate_limit
        self._window_s = rate_window_s
        self._used = 0
        self._reset = time.time() + rate_window_s
        self._ids = itertools.count(1)

    # -- inspection -----------------------------------------------------------------------------------

    def issues(self, repo: str) -> list[StoredIssue]:
        """The repository's issues, oldest first."""
        with self.lock:
            return list(self.repos[repo])

    def close(self, repo: str, number: int, reason: str = "completed") -> None:
        """Close an issue as a maintainer would."""
        with self.lock:
            issue = self.repos[repo][number - 1]
            issue.state, issue.state_reason = "closed", reason

    # -- protocol -------------------------------------------------------------------------------------

    def _rate_headers(self) -> dict[str, str]:
        return {"x-ratelimit-limit": str(self._limit), "x-ratelimit-remaining": str(max(0, self._limit - self._used)),
                "x-ratelimit-used": str(self._used), "x-ratelimit-reset": str(int(self._reset)),
                "x-ratelimit-resource": "core", "x-github-api-version-selected": "2022-11-28"}

    def _json(self, status: int, doc: Any, extra: dict[str, str] | None = None) -> Response:
        return Response.json(status, doc, {**self._rate_headers(), **(extra or {})})

    def route(self, request: Request) -> Response:
        auth = request.headers.get("authorization", "")
        if auth not in (f"Bearer {self.token}", f"token {self.token}"):
            return Response.json(401, {"message": "Bad credentials", "documentation_url": _DOCS, "status": "401"})
        if time.time() >= self._reset:
            self._used, self._reset = 0, time.time() + self._window_s
        if self._used >= self._limit:
            return self._json(403, {"message": "API rate limit exceeded for user ID 1.", "documentation_url": _DOCS})
        self._used += 1
        match = _ISSUES.match(request.path)
        if match is None or match["repo"] not in self.repos:
            return self._json(404, {"message": "Not Found", "documentation_url": _DOCS, "status": "404"})
        issues = self.repos[match["repo"]]
        if match["number"] is None:
            if request.method == "GET":
                return self._list(request, match["repo"], issues)
            return self._create(request, match["repo"])
        number = int(match["number"])
        if not 0 < number <= len(issues):
            return self._json(404, {"message": "Not Found", "documentation_url": _DOCS, "status": "404"})
        issue = issues[number - 1]
        if match["comments"]:
            return self._comments(request, match["repo"], issue)
        if request.method == "PATCH":
            doc = request.json() or {}
            if doc.get("state") in ("open", "closed"):
                issue.state = doc["state"]
                issue.state_reason = "reopened" if doc["state"] == "open" else doc.get("state_reason", "completed")
        return self._json(200, self._doc(match["repo"], issue))

    def _doc(self, repo: str, issue: StoredIssue) -> dict[str, Any]:
        url = f"{self.url}/repos/{repo}/issues/{issue.number}"
        return {
            "id": 1000 + issue.number, "node_id": f"I_{issue.number}", "number": issue.number, "url": url,
            "html_url": f"https://github.example/{repo}/issues/{issue.number}", "title": issue.title,
            "body": issue.body, "state": issue.state, "state_reason": issue.state_reason,
            "labels": [{"id": abs(hash(name)) % 10**8, "name": name, "color": "ededed", "default": False}
                       for name in issue.labels],
            "comments": len(issue.comments), "user": {"login": "logagent-bot"},
            "created_at": "2024-06-01T00:00:00Z", "updated_at": "2024-06-01T00:00:00Z",
        }

    def _page(self, request: Request, items: list[Any], path: str) -> tuple[list[Any], dict[str, str]]:
        per_page = min(100, int(request.query.get("per_page", "30")))
        page = int(request.query.get("page", "1"))
        chunk = items[(page - 1) * per_page: page * per_page]
        headers: dict[str, str] = {}
        if page * per_page < len(items):
            query = "&".join(f"{k}={v}" for k, v in {**request.query, "page": str(page + 1)}.items())
            headers["link"] = f'<{self.url}{path}?{query}>; rel="next"'
        return chunk, headers

    def _list(self, request: Request, repo: str, issues: list[StoredIssue]) -> Response:
        wanted = [label for label in request.query.get("labels", "").split(",") if label]
        state = request.query.get("state", "open")
        found = [issue for issue in issues if all(label in issue.labels for label in wanted)
                 and (state == "all" or issue.state == state)]
        found.sort(key=lambda issue: issue.created, reverse=request.query.get("direction", "desc") == "desc")
        chunk, headers = self._page(request, found, request.path)
        return self._json(200, [self._doc(repo, issue) for issue in chunk], headers)

    def _create(self, request: Request, repo: str) -> Response:
        doc = request.json() or {}
        if not doc.get("title"):
            return self._json(422, {"message": "Validation Failed", "documentation_url": _DOCS, "errors": [
                {"resource": "Issue", "code": "missing_field", "field": "title"}]})
        issues = self.repos[repo]
        labels = [] if self.drop_labels else [str(label) for label in doc.get("labels", [])]
        issue = StoredIssue(len(issues) + 1, doc["title"], doc.get("body") or "", labels, created=next(self._ids))
        issues.append(issue)
        return self._json(201, self._doc(repo, issue), {"location": f"{self.url}/repos/{repo}/issues/{issue.number}"})

    def _comments(self, request: Request, repo: str, issue: StoredIssue) -> Response:
        if request.method == "POST":
            body = (request.json() or {}).get("body")
            if not body:
                return self._json(422, {"message": "Validation Failed", "documentation_url": _DOCS})
            issue.comments.append(body)
            return self._json(201, {"id": next(self._ids), "body": body, "user": {"login": "logagent-bot"}})
        docs = [{"id": 5000 + i, "body": body, "user": {"login": "logagent-bot"}} for i, body in
                enumerate(issue.comments)]
        chunk, headers = self._page(request, docs, request.path)
        return self._json(200, chunk, headers)
