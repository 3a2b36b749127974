"""A server that speaks GitLab's REST API (v4) for issues and notes, for driving the GitLab issue sink.

Implemented as GitLab documents it: `PRIVATE-TOKEN` authentication (`401 {"message": "401
Unauthorized"}` otherwise); projects addressed by id or URL-encoded path (`group%2Fname`);
`GET /projects/:id/issues` with `labels` (comma-separated, all must match), `state` (`opened`, `closed`,
absent for both), `order_by=created_at`, `sort`, `per_page`, `page` and the `x-next-page` header;
`POST /projects/:id/issues` (`title` required, else `400 {"message": {"title": ["can't be blank"]}}`;
comma-separated `labels`, created when new); `PUT /projects/:id/issues/:iid` with `state_event`
(`close`, `reopen`); `GET|POST /projects/:id/issues/:iid/notes`. Rate limits answer `429` with
`Retry-After` and `RateLimit-*` headers; they are injected as faults.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, ClassVar
from urllib.parse import unquote

from tests.github_server import StoredIssue
from tests.protocol_server import ProtocolServer, Request, Response

_PATH = re.compile(r"^/api/v4/projects/(?P<project>[^/]+)/issues(?:/(?P<iid>\d+)(?P<notes>/notes)?)?$")


class GitLabServer(ProtocolServer):
    """Projects with issues; `token` is the only credential accepted."""

    name: ClassVar[str] = "gitlab-api"

    def __init__(self, projects: tuple[str, ...] = ("acme/checkout",), *, token: str = "glpat-notifyTestToken",
                 delay_s: float = 0.0) -> None:
        super().__init__(delay_s=delay_s)
        self.token = token
        self.projects: dict[str, list[StoredIssue]] = {project: [] for project in projects}
        self._ids = itertools.count(1)

    @property
    def api_url(self) -> str:
        """The v4 API root."""
        return self.url + "/api/v4"

    def issues(self, project: str) -> list[StoredIssue]:
        """The project's issues, oldest first."""
        with self.lock:
            return list(self.projects[project])

    def close(self, project: str, iid: int) -> None:
        """Close an issue as a maintainer would."""
        with self.lock:
            self.projects[project][iid - 1].state = "closed"

    def route(self, request: Request) -> Response:
        if request.headers.get("private-token") != self.token:
            return Response.json(401, {"message": "401 Unauthorized"})
        match = _PATH.match(request.path)
        project = unquote(match["project"]) if match else ""
        if match is None or project not in self.projects:
            return Response.json(404, {"message": "404 Project Not Found"})
        issues = self.projects[project]
        if match["iid"] is None:
            return self._list(request, project, issues) if request.method == "GET" else self._create(request, project)
        iid = int(match["iid"])
        if not 0 < iid <= len(issues):
            return Response.json(404, {"message": "404 Issue Not Found"})
        issue = issues[iid - 1]
        if match["notes"]:
            return self._notes(request, issue)
        if request.method == "PUT":
            event = (request.json() or {}).get("state_event")
            issue.state = {"reopen": "opened", "close": "closed"}.get(event, issue.state)
        return Response.json(200, self._doc(project, issue))

    def _doc(self, project: str, issue: StoredIssue) -> dict[str, Any]:
        return {"id": 7000 + issue.number, "iid": issue.number, "project_id": 42, "title": issue.title,
                "description": issue.body, "state": issue.state, "labels": list(issue.labels),
                "web_url": f"https://gitlab.example/{project}/-/issues/{issue.number}",
                "user_notes_count": len(issue.comments), "created_at": "2024-06-01T00:00:00.000Z"}

    def _paged(self, request: Request, items: list[Any]) -> Response:
        per_page = min(100, int(request.query.get("per_page", "20")))
        page = int(request.query.get("page", "1"))
        chunk = items[(page - 1) * per_page: page * per_page]
        more = page * per_page < len(items)
        headers = {"x-page": str(page), "x-per-page": str(per_page), "x-total": str(len(items)),
                   "x-next-page": str(page + 1) if more else ""}
        return Response.json(200, chunk, headers)

    def _list(self, request: Request, project: str, issues: list[StoredIssue]) -> Response:
        wanted = [label for label in request.query.get("labels", "").split(",") if label]
        state = request.query.get("state")
        found = [issue for issue in issues if all(label in issue.labels for label in wanted)
                 and (state is None or issue.state == state)]
        found.sort(key=lambda issue: issue.created, reverse=request.query.get("sort", "desc") == "desc")
        return self._paged(request, [self._doc(project, issue) for issue in found])

    def _create(self, request: Request, project: str) -> Response:
        doc = request.json() or {}
        if not doc.get("title"):
            return Response.json(400, {"message": {"title": ["can't be blank"]}})
        issues = self.projects[project]
        labels = [label for label in str(doc.get("labels", "")).split(",") if label]
        issue = StoredIssue(len(issues) + 1, doc["title"], doc.get("description") or "", labels, state="opened",
                            created=next(self._ids))
        issues.append(issue)
        return Response.json(201, self._doc(project, issue))

    def _notes(self, request: Request, issue: StoredIssue) -> Response:
        if request.method == "POST":
            body = (request.json() or {}).get("body")
            if not body:
                return Response.json(400, {"message": {"note": ["can't be blank"]}})
            issue.comments.append(body)
            return Response.json(201, {"id": next(self._ids), "body": body, "system": False})
        docs = [{"id": 9000 + i, "body": body, "system": False} for i, body in enumerate(issue.comments)]
        return self._paged(request, docs)
