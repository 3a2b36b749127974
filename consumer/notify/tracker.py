"""Issue trackers (GitHub, GitLab): one issue per failure of a server, later analyses as comments.

An issue is found by its key label (`logagent:<digest of server and fingerprint>`, see `issue_key`), not by
search: the label listing is consistent right after a write, search indexes are not. Each issue body and
comment carries a hidden marker with its analysis id, so a replayed analysis finds itself and writes
nothing. Every step looks before it writes, so a retried or replayed delivery (after a timeout, a
SIGKILL, a rebalance) never opens a second issue or posts a second comment.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from consumer.notify.notice import Notice, issue_key
from consumer.notify.render import SourceLinks, clip, headline, judged, place, prose_and_code, span_text
from consumer.notify.transport import DeliveryError, Outcome

__all__ = ["Issue", "IssueApi", "IssueSink", "analysis_marker", "comment_body", "issue_body", "issue_title"]

_TITLE_CHARS = 200
_TEXT_CHARS = 6000
_CODE_CHARS = 4000
_BACKTICKS = re.compile(r"`+")
# Backslash-escaped, each renders as itself: links, images, emphasis, headings (`#`, and `===`/`---` under a
# line), lists, tables, and the autolinks GFM makes of `https://…` and `www.…` (`:` and `.` escaped).
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+!|~\-=.:])")
_QUICK_ACTION = re.compile(r"^([ \t]*)/", re.MULTILINE)
# What Markdown, or GitLab before it looks for quick actions, reads as a line break besides `\n`.
_BREAKS = "\r\x0b\x0c\x85\u2028\u2029"
_BREAKS_TO_NEWLINES = str.maketrans(dict.fromkeys(_BREAKS, "\n"))
_BREAKS_TO_SPACES = str.maketrans(dict.fromkeys("\n" + _BREAKS, " "))


@dataclass(frozen=True)
class Issue:
    """An issue as the sink needs it."""

    number: int
    body: str
    url: str
    labels: frozenset[str]
    closed: bool = False
    reopenable: bool = False
    """Closed as done (not as "won't fix"): a comeback of the failure reopens it."""


class IssueApi(Protocol):
    """The five calls a tracker must answer; each raises DeliveryError on failure."""

    name: str

    async def find(self, target: str, label: str) -> Issue | None:
        """The oldest issue (open or closed) carrying `label`, or None."""

    async def create(self, target: str, title: str, body: str, labels: Sequence[str]) -> Issue:
        """Open an issue."""

    def comments(self, target: str, number: int) -> AsyncIterator[str]:
        """The bodies of the issue's comments, oldest first, page by page."""

    async def comment(self, target: str, number: int, body: str) -> None:
        """Add a comment."""

    async def reopen(self, target: str, number: int) -> None:
        """Reopen a closed issue."""


def escape_md(text: str) -> str:
    """Untrusted prose for Markdown: no raw HTML (so no fake markers), no link, image, emphasis or heading,
    no @mentions that would ping, and no line that GitLab would run as a quick action (`/close`, `/unlabel`
    in a description or a note run with the bot's rights)."""
    text = _html_text(text.replace("\r\n", "\n").translate(_BREAKS_TO_NEWLINES))
    text = _MARKDOWN.sub(r"\\\1", text).replace("@", "@\u200b")
    return _QUICK_ACTION.sub(r"\1\\/", text)


def _html_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _tick(text: str) -> str:
    """Untrusted text as inline code: Markdown decodes no entity there and links no mention, so only a
    backtick and a line break (either would end the span) need replacing."""
    return "`" + text.replace("`", "\u02cb").translate(_BREAKS_TO_SPACES) + "`"


def _fenced(code: str, info: str = "") -> str:
    """`code` in a fence longer than any backtick run inside it, so it cannot close the block."""
    longest = max((len(run) for run in _BACKTICKS.findall(code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{code}\n{fence}"


def _carries(body: str, marker: str) -> bool:
    """Whether `body` is one we wrote for the marker's analysis: the marker opens it (a log's text inside,
    in a code span say, cannot stand for it)."""
    return body.lstrip().startswith(marker)


def analysis_marker(analysis_id: str) -> str:
    """The hidden line naming the analysis a body or comment came from."""
    # Inside an HTML comment Markdown escapes nothing: only the comment's end must not be forged.
    return f"<!-- logagent:analysis={_html_text(analysis_id)} -->"


def issue_title(notice: Notice) -> str:
    """`NumberFormatException on checkout-service in parse`."""
    culprit = notice.culprit
    where = f" in {culprit.function or culprit.path.rsplit('/', 1)[-1]}" if culprit else ""
    return clip(f"{headline(notice)}{where}", _TITLE_CHARS)


def _details(notice: Notice, links: SourceLinks) -> list[str]:
    burst = notice.cluster
    facts = f"**{escape_md(notice.server)}** · {_tick(burst.exception_type or 'unknown')} · {span_text(burst)}"
    lines = [facts + (f" · tenant {_tick(burst.tenant)}" if burst.tenant else ""), ""]
    culprit = notice.culprit
    if culprit is not None:
        url = links.source(notice.server, notice.commit, culprit.path, culprit.line)
        text = f"**Culprit:** [{_tick(place(culprit))}]({url})" if url else f"**Culprit:** {_tick(place(culprit))}"
        lines.append(text + (f" in {_tick(culprit.function)}" if culprit.function else ""))
    if notice.commit:
        url = links.commit(notice.server, notice.commit)
        short = _tick(notice.commit[:10])
        lines.append(f"**Commit:** [{short}]({url})" if url else f"**Commit:** {short}")
    if notice.status == "failed":
        lines += ["", f"**Analysis failed:** {escape_md(notice.failure_reason or 'no reason given')}"]
    if notice.root_cause:
        lines += ["", "### Root cause", ""]
        for is_code, chunk in prose_and_code(clip(notice.root_cause, _TEXT_CHARS)):
            lines += [_fenced(chunk) if is_code else escape_md(chunk), ""]
    if notice.fix is not None:
        fix = notice.fix
        lines += ["", f"### Suggested fix in {_tick(fix.path)}", ""]
        if fix.explanation:
            lines += [clip(escape_md(fix.explanation), _TEXT_CHARS), ""]
        if fix.before or fix.after:
            diff = [*(f"-{line}" for line in fix.before.splitlines()), *(f"+{line}" for line in fix.after.splitlines())]
            lines.append(_fenced(clip("\n".join(diff), _CODE_CHARS), "diff"))
    cases = ", ".join(f"{_tick(case.memory_id[:8])} {case.score:.2f}" + (" stale" if case.stale else "")
                      + (f" {escape_md(case.verdict)}" if case.verdict else "") for case in notice.past_cases[:5])
    lines += ["", f"**Analysis:** {escape_md(judged(notice))}, confidence {notice.confidence:.2f} · "
                  f"past cases: {cases or 'none'}"]
    return lines


def issue_body(notice: Notice, links: SourceLinks) -> str:
    """The first analysis of a failure, as the issue's description."""
    return "\n".join([
        analysis_marker(notice.analysis_id), *_details(notice, links), "",
        f"<sub>Log Agent analysis {_tick(notice.analysis_id)}. Later analyses of this failure are added "
        "as comments.</sub>",
    ])


def comment_body(notice: Notice, links: SourceLinks) -> str:
    """A later analysis of the same failure (a recurrence, or the failure at a new commit)."""
    seen = "Seen again (recurrence at the same commit)" if notice.status == "recurrence" else "Analysed again"
    return "\n".join([
        analysis_marker(notice.analysis_id), f"#### {seen}", "",
        *_details(notice, links), "", f"<sub>Log Agent analysis {_tick(notice.analysis_id)}.</sub>",
    ])


class IssueSink:
    """Opens or comments issues through one tracker's API; `targets` maps servers to repositories."""

    def __init__(self, api: IssueApi, targets: Mapping[str, str], default: str | None, labels: Sequence[str],
                 links: SourceLinks, *, reopen: bool = True) -> None:
        self.name = api.name
        self._api = api
        self._targets = dict(targets)
        self._default = default
        self._labels = list(labels)
        self._links = links
        self._reopen = reopen

    def target(self, server: str) -> str | None:
        """The repository or project receiving `server`'s issues."""
        return self._targets.get(server, self._default)

    async def deliver(self, notice: Notice, raw: bytes) -> Outcome:
        """Open the failure's issue, or comment on it; nothing when this analysis is already there."""
        target = self.target(notice.server)
        if target is None:
            return Outcome.SKIPPED
        key = issue_key(notice)
        marker = analysis_marker(notice.analysis_id)
        issue = await self._api.find(target, key)
        if issue is None:
            created = await self._api.create(target, issue_title(notice), issue_body(notice, self._links),
                                             [*self._labels, key])
            if key not in created.labels:
                # Without the key label the next lookup misses it and a duplicate follows: refuse to go on.
                raise DeliveryError("labels_dropped", f"issue {created.url} lacks label {key}: the token "
                                    "needs the right to set labels", retriable=False)
            return Outcome.DELIVERED
        if _carries(issue.body, marker) or await self._commented(target, issue.number, marker):
            return Outcome.DUPLICATE
        if issue.closed and issue.reopenable and self._reopen:
            # Reopen first: after a crash between the two, the replay finds no comment yet and writes it.
            await self._api.reopen(target, issue.number)
        await self._api.comment(target, issue.number, comment_body(notice, self._links))
        return Outcome.DELIVERED

    async def _commented(self, target: str, number: int, marker: str) -> bool:
        async for body in self._api.comments(target, number):
            if _carries(body, marker):
                return True
        return False
