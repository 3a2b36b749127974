"""The readable forms of what Log Agent knows: an analysis, stored cases, servers, one case in full.

Everything shown here came from logs, a model or the memory, so every string passes `_clean` (terminal
control characters made visible) and reaches rich as plain `Text`, never as markup.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from analysis.report import NO_TRACE_NOTE, Analysis, Fix, PastCaseRef
from store import CaseDetail, CaseSummary, ServerSummary

__all__ = ["CodeLines", "excerpt_of", "print_analysis", "print_case", "print_cases", "print_servers"]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_EXCERPT = re.compile(r"\n\nCode at (?P<path>[^\n]+):\n(?P<rows>(?:\d+\| [^\n]*(?:\n|$))+)")
_ROW = re.compile(r"^(\d+)\| (.*)")  # matched at a line's start only
_STATUS_STYLE = {"analyzed": "bold green", "recurrence": "bold cyan", "heuristic": "bold yellow",
                 "failed": "bold red"}
_VERDICT_STYLE = {"wrong": "bold red", "correct": "bold green"}
_INDENT = (0, 0, 0, 2)


def _indented(renderable: RenderableType) -> Padding:
    return Padding(renderable, _INDENT, expand=False)


@dataclass(frozen=True, slots=True)
class CodeLines:
    """Lines of a file around a line of interest: `lines[0]` is line `first`."""

    path: str
    first: int
    lines: tuple[str, ...]
    focus: int | None = None


def _clean(text: object) -> str:
    """`text` with control characters (escape sequences, carriage returns) shown, not obeyed."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def _line(*parts: tuple[object, str] | str) -> Text:
    """One line of text from (text, style) pairs and plain strings, every piece cleaned."""
    text = Text()
    for part in parts:
        value, style = (part, "") if isinstance(part, str) else part
        text.append(_clean(value), style=style)
    return text


def _emit(console: Console, *renderables: RenderableType) -> None:
    """Print, one renderable under the other; into a pipe (no colour, no escapes) without the spaces rich
    pads lines with."""
    if console.is_terminal:
        console.print(Group(*renderables))
        return
    with console.capture() as captured:
        console.print(Group(*renderables))
    console.file.write("".join(f"{line.rstrip()}\n" for line in captured.get().splitlines()))


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    if seconds < 2 * 86_400:
        return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
    return f"{seconds / 86_400:.1f} days"


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _fields(rows: Sequence[tuple[RenderableType, RenderableType]]) -> Table:
    """Label and value rows; a long value wraps under itself, not under its label."""
    table = Table(box=None, show_header=False, padding=(0, 2, 0, 0), pad_edge=False)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    for label, value in rows:
        table.add_row(label, value)
    return table


def _heading(title: str) -> Text:
    return Text(title, style="bold underline")


# -- one analysis --------------------------------------------------------------------------------------


def excerpt_of(root_cause: str) -> CodeLines | None:
    """The code excerpt the heuristic localiser appends to its root cause, if there is one."""
    match = _EXCERPT.search(root_cause)
    if match is None:
        return None
    rows = [_ROW.match(row) for row in match.group("rows").splitlines()]
    numbered = [(int(row.group(1)), row.group(2)) for row in rows if row]
    if not numbered:
        return None
    return CodeLines(match.group("path"), numbered[0][0], tuple(text for _, text in numbered))


def _root_cause_text(root_cause: str) -> str:
    match = _EXCERPT.search(root_cause)
    return (root_cause[: match.start()] if match else root_cause).strip()


def _highlighted(code: str, lexer: str) -> list[Text]:
    """`code` coloured by its language (pygments through rich), one `Text` per line."""
    return list(Syntax(code, lexer, theme="ansi_dark").highlight(code).split("\n"))


def _code(code: CodeLines) -> RenderableType:
    text = "\n".join(_clean(line) for line in code.lines)
    width = len(str(code.first + len(code.lines)))
    rows = []
    for number, line in enumerate(_highlighted(text, Syntax.guess_lexer(code.path, text)), start=code.first):
        mark = ("❱ ", "bold red") if number == code.focus else "  "
        rows.append(Text.assemble(mark, (f"{number:>{width}} │ ", "dim"), line))
    return Group(*rows)


def _diff(fix: Fix) -> RenderableType:
    lines = difflib.unified_diff(fix.before.splitlines(), fix.after.splitlines(), fromfile=f"a/{fix.path}",
                                 tofile=f"b/{fix.path}", lineterm="")
    return Group(*_highlighted(_clean("\n".join(lines)), "diff"))


def _header(analysis: Analysis) -> list[RenderableType]:
    cluster = analysis.cluster
    span = cluster.last_seen - cluster.first_seen
    first = _line((f" {analysis.status} ", f"reverse {_STATUS_STYLE.get(analysis.status, 'bold')}"), "  ",
                  (cluster.server, "bold"), f"  tenant {cluster.tenant}  ", (_plural(cluster.count, "event"), "bold"),
                  f"  at commit {(analysis.commit or '?')[:12]}")
    when = (f"seen {_when(cluster.first_seen)}" if span <= 0 else
            f"from {_when(cluster.first_seen)} to {_when(cluster.last_seen)} ({_duration(span)})")
    analyzer = f"{analysis.analyzer} {analysis.model}".strip()
    second = _line(f"{when}; {analyzer}, confidence {analysis.confidence:.2f}; analysis ",
                   (analysis.analysis_id, "dim"))
    lines: list[RenderableType] = [first, second, Text()]
    messages = cluster.exception_messages
    exception = _line((cluster.exception_type or "(a log message, no exception)", "bold red"))
    if messages and cluster.count == 1:
        exception.append(_clean(f": {messages[0].example or messages[0].message}"))
    elif messages:  # the masked form speaks for all its events; the first as logged shows a real value
        top = messages[0]
        exception.append(_clean(f": {top.message}"))
        if top.example and top.example != top.message:
            exception.append(_clean(f"  (first as logged: {top.example})"), style="dim")
    lines.append(exception)
    uncounted = cluster.count - sum(m.count for m in messages)
    if len(messages) > 1 or (messages and uncounted > 0):
        more = "+" if uncounted > 0 else ""  # past the tally's cap: more messages than listed
        lines.append(_line((f"{len(messages)}{more} distinct messages", "bold"), " in this burst:"))
        lines += [_line(f"  {m.count:>6}×  ", m.message) for m in messages]
    return lines


def _culprit(analysis: Analysis, code: CodeLines | None) -> list[RenderableType]:
    culprit = analysis.culprit
    if culprit is None:
        why = "the log carries no stack trace" if NO_TRACE_NOTE in analysis.notes else \
            "no frame of the trace maps to this repository"
        return [_line(("Culprit", "bold underline"), f"  none: {why}")]
    where = f"{culprit.path}:{culprit.line}" if culprit.line else culprit.path
    lines: list[RenderableType] = [_line(("Culprit", "bold underline"), "  ", (where, "bold magenta"), " ",
                                         culprit.function)]
    code = code or excerpt_of(analysis.root_cause)
    if code is not None:
        focus = code.focus or (culprit.line if code.path == culprit.path else None)
        lines.append(_indented(_code(CodeLines(code.path, code.first, code.lines, focus))))
    return lines


def _suspects(analysis: Analysis) -> list[RenderableType]:
    parts: list[RenderableType] = []
    rows: list[tuple[RenderableType, RenderableType]] = []
    for rank, s in enumerate(analysis.suspects, start=1):
        where = _line((f"{s.path}:{s.line}" if s.line else s.path, "magenta"), f" {s.function}")
        if s.reason:
            where.append(_clean(f"\n{s.reason}"), style="dim")
        rows.append((f"{rank}. {s.score:.2f}", where))
    if rows:
        parts += [_heading("Suspects, most likely first"), _indented(_fields(rows))]
    commits = [(Text.assemble((c.sha[:12], "yellow"), f" {c.date[:10]}"),
                _line(f"{c.author}: ", (c.summary, "bold"), f" ({c.path})" if c.path else ""))
               for c in analysis.suspect_commits]
    if commits:
        parts += [_heading("Suspect commits (they last touched the culprit lines)"), _indented(_fields(commits))]
    return parts


def _verdict_text(verdict: str | None) -> Text:
    if verdict is None:
        return Text("no verdict", style="dim")
    return Text(f"marked {verdict}", style=_VERDICT_STYLE[verdict])


def _past_cases(cases: Sequence[PastCaseRef]) -> list[RenderableType]:
    if not cases:
        return []
    parts: list[RenderableType] = [_heading("Past cases recalled")]
    for case in cases:
        trust = f"  trust {case.trust:.2f}" if case.trust is not None else ""
        line = Text.assemble("  ", _verdict_text(case.verdict), "  ", (_clean(case.memory_id), "bold"),
                             f"  score {case.score:.2f}{trust}")
        if case.stale:
            line.append("  STALE: " + _clean("; ".join(case.stale_reasons) or "too old"), style="yellow")
        parts.append(line)
        if case.note:
            parts.append(_indented(_indented(Text(f'"{_clean(case.note)}"', style="italic"))))
    return parts


def _notes(analysis: Analysis) -> list[RenderableType]:
    parts: list[RenderableType] = []
    if analysis.needs_review:
        parts += [_line(("Needs review", "bold red underline")),
                  _indented(_fields([(Text("!", style="bold red"), _line(r)) for r in analysis.review_reasons]))]
    if analysis.failure_reason:
        parts.append(_line(("Failed: ", "bold red"), analysis.failure_reason))
    if analysis.notes:
        parts += [_heading("Notes"), _indented(_fields([("-", _line(note)) for note in analysis.notes]))]
    return parts


def _cause_and_fix(analysis: Analysis) -> list[RenderableType]:
    parts: list[RenderableType] = []
    cause = _root_cause_text(analysis.root_cause)
    if cause:
        parts += [_heading("Root cause"), _indented(Text(_clean(cause)))]
    fix = analysis.fix
    if fix is not None:
        parts.append(_line(("Fix", "bold underline"), f"  {fix.path}"))
        if fix.explanation:
            parts.append(_indented(Text(_clean(fix.explanation))))
        if fix.before or fix.after:
            parts.append(_indented(_diff(fix)))
    return parts


def analysis_view(analysis: Analysis, code: CodeLines | None = None) -> RenderableType:
    """The readable form of one analysis: its sections, a blank line between them."""
    sections = [_header(analysis), _culprit(analysis, code), _cause_and_fix(analysis), _suspects(analysis),
                _past_cases(analysis.past_cases), _notes(analysis)]
    parts: list[RenderableType] = []
    for section in filter(None, sections):
        parts += [*([Text()] if parts else []), *section]
    return Group(*parts)


def print_analysis(console: Console, analysis: Analysis, code: CodeLines | None = None) -> None:
    """Print one analysis readably."""
    _emit(console, analysis_view(analysis, code))


# -- the memory ----------------------------------------------------------------------------------------


def print_cases(console: Console, cases: Sequence[CaseSummary]) -> None:
    """Stored cases, one block each: id, where and when, trust and verdict, the culprit and the root
    cause's first line (and the similarity score, for a search)."""
    parts: list[RenderableType] = []
    for case in cases:
        verdict = Text.assemble(f"{case.trust:.2f}, ", _verdict_text(case.verdict))
        if case.note:
            verdict.append(f' "{_clean(case.note)}"', style="italic")
        rows: list[tuple[RenderableType, RenderableType]] = [
            ("stored", _line(f"{_when(case.created_at)} at commit {(case.commit or '?')[:12]}")),
            ("trust", verdict)]
        if case.score is not None:
            rows.append(("similarity", _line(f"{case.score:.2f}")))
        rows += [("culprit", _line((case.culprit or "none", "magenta"))),
                 ("root cause", _line(case.root_cause or "(none recorded)"))]
        head = _line((case.memory_id, "bold"), f"  {case.server} / {case.tenant}  {case.status}")
        parts += [*([Text()] if parts else []), head, _indented(_fields(rows))]
    _emit(console, *parts)


def print_servers(console: Console, servers: Sequence[ServerSummary]) -> None:
    """What the memory holds per server and tenant."""
    table = Table(box=None, padding=(0, 2), pad_edge=False, header_style="bold")
    table.add_column("server")
    table.add_column("tenant")
    table.add_column("cases", justify="right")
    table.add_column("newest case")
    table.add_column("expired", justify="right")
    for s in servers:
        table.add_row(_clean(s.server), _clean(s.tenant), str(s.cases), _when(s.newest_at), str(s.expired))
    _emit(console, table)


def _stored_analysis(analysis: Mapping[str, Any]) -> RenderableType:
    try:
        return analysis_view(Analysis.model_validate(analysis))
    except ValidationError:  # written by another version: show what it says without its structure
        return Text(_clean(analysis.get("root_cause") or "(the stored analysis cannot be read)"))


def _freshness(detail: CaseDetail) -> Text:
    if detail.stale:
        return _line(("STALE: ", "bold yellow"), "; ".join(detail.stale_reasons))
    if not detail.cited_files:
        against = "it cites no code lines, so only its age can make it stale"
    elif not detail.summary.commit:
        against = "its cited lines cannot be compared with the code: the case records no commit"
    elif detail.checked_against:
        against = f"its cited lines are unchanged at {detail.checked_against[:12]}"
    else:
        against = "its cited lines were not compared with the code (--repo compares them)"
    return _line(("fresh: ", "bold green"),
                 f"{_duration(detail.age_s)} old, stale past {_duration(detail.max_age_s)}; {against}")


def _history(detail: CaseDetail) -> list[RenderableType]:
    verdicts: list[tuple[str, RenderableType]] = []
    for v in detail.verdicts:
        text = _verdict_text(v.verdict)
        if v.note:
            text.append(f' "{_clean(v.note)}"', style="italic")
        verdicts.append((_when(v.at), text))
    trust = [(_when(p.at), _line((f"{p.trust:.2f}", "bold"), f"  {p.cause}")) for p in detail.trust_history]
    return [_heading("Verdicts"),
            _indented(_fields(verdicts) if verdicts else
                      Text("none yet (logagent feedback ID --verdict correct|wrong --note WHY)", style="dim")),
            _heading("Trust"), _indented(_fields(trust))]


def print_case(console: Console, detail: CaseDetail) -> None:
    """One stored case in full: where it came from, its freshness, verdicts, trust, then the analysis."""
    case = detail.summary
    facts = [("status", _line(f"{case.status} ({case.analyzer} analysis), scope {case.scope}")),
             ("stored", _line(f"{_when(case.created_at)} ({_duration(detail.age_s)} ago) at commit "
                              f"{(case.commit or '?')[:12]}")),
             ("expired" if detail.expired else "expires", _line(_when(case.expires_at))),
             ("freshness", _freshness(detail))]
    _emit(console,
          _line(("Case ", "bold"), (case.memory_id, "bold"), f"  {case.server} / {case.tenant}"),
          _indented(_fields(facts)), *_history(detail),
          _heading("Error as remembered"), _indented(Text(_clean(detail.error_text))),
          _heading("Stored analysis"), _indented(_stored_analysis(detail.analysis)))
