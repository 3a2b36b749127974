"""The heuristic localiser: no LLM. Frames → repository files → the code they ran → ranked suspects, report.

It is the offline analyzer and the agent's starting point: `find_suspects` gives the findings the agent's
prompt carries (suspects, and the evidence read in the code); `localise` turns them into a full
`status: heuristic` report. Each frame is placed in its file (`site`), the code at the raising frame is
read and the blame moved along what it does (`blame`), the frames are ranked around that (`suspects`),
files no frame names are added from the message, the test frames and the constant at fault (`clue`), and
the files changed since the last good deploy weigh in as a prior.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import git

from analysis.code.blame import Blame, blame
from analysis.code.burst import burst_analysis
from analysis.code.clue import Clue, ClueFinder, combine
from analysis.code.filemap import FileIndex, FileMatch, frame_paths, is_generated_path, is_test_path
from analysis.code.gitlog import changed_lines
from analysis.code.repo import Checkout
from analysis.code.site import SourceReader, adjacency, fault_kind, read_sites, real_frame
from analysis.code.suspects import (
    Candidate,
    candidates_from,
    definition_pattern,
    frame_name,
    is_null_dereference,
    java_null_callee,
    map_frames,
    merge,
    null_callee,
    rank_exception,
    receiver_type,
)
from analysis.code.tools import FileTools
from analysis.code.validate import validate_citations
from analysis.event import Cluster, ErrorEvent, ExceptionInfo, Frame
from analysis.intake.signature import is_in_app
from analysis.report import (
    NO_TRACE_NOTE,
    Analysis,
    CitationRef,
    Location,
    Suspect,
    SuspectCommit,
)

_EXCERPT_RADIUS = 6
_BLAME_RADIUS = 2
_MAX_SUSPECTS = 5
_MAX_MESSAGE_CHARS = 300
_LOOKBACK_LINES = 25
_CHAIN_WEIGHT = 0.15
"""A wrapping exception's blamed frame ranks below the root cause's first callers: it only caught."""
_CLUE_WEIGHT = {"alone": 0.8, "beside": 0.5}
"""Clues found without a frame: the whole answer without application frames, below the frames beside them."""
_HISTORY_BONUS = 0.1
_ASSIGNED_CALL = re.compile(r"=\s*(?:await\s+|new\s+)?((?:[\w$]+\.)*[\w$]+)\s*\(")


@dataclass(frozen=True, slots=True)
class Findings:
    """What the localiser found: ranked suspects (culprit first), the code around the culprit, the
    evidence read in the code (each step a sentence to check), notes."""

    suspects: tuple[Suspect, ...]
    excerpt: str
    excerpt_range: tuple[str, int, int] | None
    notes: tuple[str, ...]
    evidence: tuple[str, ...] = ()

    @property
    def culprit(self) -> Suspect | None:
        """The top suspect, if any frame mapped to the repository."""
        return self.suspects[0] if self.suspects else None

    @property
    def location(self) -> Location | None:
        """The culprit as the report names it."""
        top = self.culprit
        return Location(path=top.path, line=top.line, function=top.function) if top else None


def find_suspects(
    event: ErrorEvent,
    tools: FileTools,
    index: FileIndex | None = None,
    in_app_prefixes: Sequence[str] = (),
    changed: tuple[str, Mapping[str, Sequence[int]]] = ("", {}),
) -> Findings:
    """Rank suspects for the event in `tools.root`: the root cause's frames read in their code first, then
    the chain, then files the message, the test frames or the history point at.

    `changed` is (the reason given, {path: first changed lines}) of the history prior (`_changes`).
    """
    index = index or FileIndex.build(tools.root, tools.limits.skip_dirs, visible=tools.jail.visible)
    reader = SourceReader(tools)
    notes: list[str] = []
    candidates: list[Candidate] = []
    verdict: Blame | None = None
    for position, exc in enumerate(reversed(event.exceptions)):
        found, decided, skipped = _rank(exc, position, index, reader)
        verdict = decided if position == 0 else verdict
        candidates += found
        notes += [n for n in skipped if n not in notes]
        if position == 0:
            notes += _unmapped_in_app(exc.frames, index, in_app_prefixes)
    clues = _clues(event, tools, index, reader, changed, verdict, bool(candidates))
    if not any(exception.frames for exception in event.exceptions):
        notes.append(NO_TRACE_NOTE)
    elif not candidates:
        notes.append("no frame of the trace maps to a file of the repository at this commit")
    if clues and not candidates:
        notes.append("suspects found from the message, the test frames and the history, not from a frame")
    candidates += [Candidate(c.path, c.line, "", c.score, c.reasons) for c in clues]
    ranked = _with_history(merge(candidates), changed)
    excerpt, excerpt_range = "", None
    if ranked:
        top = ranked[0]
        excerpt, excerpt_range, line_text, before = _excerpt(tools, top)
        root = event.root_cause
        raised_here = verdict is None or verdict.raiser is None
        producer = _producing_call(verdict, reader) if verdict and raised_here else ""
        if root and raised_here and (producer or is_null_dereference(root.type, root.value)):
            callee = _callee_suspect(root, top, line_text, before, index, tools, producer)
            if callee:
                ranked = merge([*ranked, callee])
    if verdict and not verdict.site.verified and verdict.site.note:
        notes.append(f"culprit line unverified: {verdict.site.note}")
    suspects = tuple(_suspect(c) for c in ranked[:_MAX_SUSPECTS])
    return Findings(suspects, excerpt, excerpt_range, tuple(notes), tuple(verdict.evidence) if verdict else ())


def _rank(
    exc: ExceptionInfo, position: int, index: FileIndex, reader: SourceReader
) -> tuple[list[Candidate], Blame | None, list[str]]:
    """Candidates of one exception of the chain, from its code when that can be read, else by position."""
    mapped, skipped = map_frames(exc, index.locate)
    sites = read_sites(exc, mapped, reader) if mapped else []
    if not sites or not sites[0].readable:
        found, notes = rank_exception(exc, position, index.locate)
        return found, None, notes
    deeper = [f for f in exc.frames[: sites[0].index] if real_frame(f)]
    kind = fault_kind(exc.type, exc.value)
    verdict = blame(sites, kind, exc.value, deeper, adjacency(exc, reader, {i: m.path for i, _, m in mapped}))
    where = "the root cause" if position == 0 else f"the wrapping {exc.type}"
    return candidates_from(verdict, sites, 1.0 if position == 0 else _CHAIN_WEIGHT, where), verdict, skipped


def _clues(
    event: ErrorEvent, tools: FileTools, index: FileIndex, reader: SourceReader,
    changed: tuple[str, Mapping[str, Sequence[int]]], verdict: Blame | None, framed: bool,
) -> list[Clue]:
    """Suspects from outside the frames: the whole answer without frames, extra suspects beside them."""
    finder = ClueFinder(tools, index, reader)
    weight = _CLUE_WEIGHT["beside" if framed else "alone"]
    root = event.root_cause
    message = f"{root.type}: {root.value}" if root else event.message
    clues = finder.from_message(message, weight * 0.6, distinctive=framed)
    if verdict is not None:
        clues += [c for name in verdict.constants for c in finder.constant(
            name, weight, f"defines {name}, the value {verdict.site.who} failed on")]
    if not framed:
        clues += finder.from_test_frames(event, weight * 0.7)
    return combine(clues)


def _with_history(ranked: list[Candidate], changed: tuple[str, Mapping[str, Sequence[int]]]) -> list[Candidate]:
    """The history prior: suspects in files changed since the last good deploy rank a little higher, and
    say so. A changed file no other evidence points at is not a suspect (a release touches many files)."""
    why, files = changed
    for cand in ranked:
        if cand.path in files and why not in cand.reasons:
            cand.score = min(1.0, cand.score + _HISTORY_BONUS)
            cand.reasons.append(why)
    return sorted(ranked, key=lambda c: -c.score)


def _unmapped_in_app(frames: Sequence[Frame], index: FileIndex, prefixes: Sequence[str]) -> list[str]:
    """A note when frames the event calls in-app are missing here: the deployed commit may differ."""
    for frame in frames:
        name = frame_name(frame)
        in_app = frame.in_app is True or any(name.startswith(p) for p in prefixes if p)
        if in_app and index.locate(frame) is None:
            return [f"in-app frame {name} has no file in the repository at this commit"]
    return []


def _excerpt(tools: FileTools, top: Candidate) -> tuple[str, tuple[str, int, int] | None, str, list[str]]:
    """Numbered code around the culprit, its range, the culprit line, and the lines above it."""
    line = top.line or 1
    start = max(1, line - _LOOKBACK_LINES)
    result = tools.read_file(top.path, start, line + _EXCERPT_RADIUS)
    if result.status != "ok" or result.data is None:
        top.reasons.append(f"line {line} could not be read at this commit")
        return "", None, "", []
    data = result.data
    if top.line is not None and top.line > data.total_lines:
        top.reasons.append(f"line {top.line} is past the end of the file ({data.total_lines} lines)")
        return "", None, "", []
    first = max(start, line - _EXCERPT_RADIUS)
    rows = [f"{n}| {data.lines[n - start]}" for n in range(first, data.end_line + 1)]
    line_text = data.lines[line - start] if line - start < len(data.lines) else ""
    before = list(data.lines[: line - start])
    return "\n".join(rows), (data.path, first, data.end_line), line_text, before


def _producing_call(verdict: Blame, reader: SourceReader) -> str:
    """The function whose result is the value that failed, when a local assigned from a call is at fault."""
    if verdict.producer is None:
        return ""
    path, line = verdict.producer
    source = reader.source(path)
    statement = source.statement_text(line) if source else ""
    found = _ASSIGNED_CALL.search(statement)
    return found.group(1).rsplit(".", 1)[-1] if found else ""


def _callee_suspect(
    root: ExceptionInfo, top: Candidate, line_text: str, before: list[str], index: FileIndex, tools: FileTools,
    producer: str,
) -> Candidate | None:
    """The function whose return value the culprit line fails on (a null, a missing key), at its definition."""
    message = root.value
    null = is_null_dereference(root.type, root.value)
    java = java_null_callee(message)
    owner_path = None
    if java:
        owner, name = java
        simple = owner.rsplit(".", 1)[-1].split("$", 1)[0]
        ext = top.path.rsplit(".", 1)[-1]
        match = index.locate(Frame(function=f"{owner}.{name}", module=owner, filename=f"{simple}.{ext}"))
        owner_path = match.path if match else None
    else:
        found = producer or null_callee(message, line_text, before)
        if not found:
            return None
        name = found
    ext = (owner_path or top.path).rsplit(".", 1)[-1]
    pattern = definition_pattern(name, ext)
    if pattern is None:
        return None
    result = tools.grep_files(pattern, path=owner_path or "", file_extension=ext)
    if result.status != "ok" or not result.data:
        return None
    hits = [m for m in result.data if not (is_test_path(m.path) or is_generated_path(m.path))]
    if not hits or len(hits) > 3:
        return None
    directory = top.path.rsplit("/", 1)[0]
    # Two classes defining `name`: the one the culprit line's receiver is declared as comes first.
    declared = receiver_type(name, [*before, line_text]) if len(hits) > 1 else None
    hits.sort(key=lambda m: (m.path.rsplit("/", 1)[-1].split(".", 1)[0] != declared, m.path != top.path,
                             not m.path.startswith(directory), m.path, m.line))
    hit = hits[0]
    what = "returns the null value dereferenced" if null else "produced the value that failed"
    reason = f"{name} {what} at {top.path}:{top.line}"
    return Candidate(hit.path, hit.line, name, round(top.score * 0.7, 3), [reason])


def _suspect(c: Candidate) -> Suspect:
    return Suspect(
        path=c.path,
        line=c.line if c.line and c.line > 0 else None,
        function=c.function,
        score=round(min(max(c.score, 0.0), 1.0), 3),
        reason="; ".join(c.reasons),
    )


def _root_cause_sentence(event: ErrorEvent, findings: Findings) -> str:
    root = event.root_cause
    message = " ".join((root.value if root else event.message).split())[:_MAX_MESSAGE_CHARS]
    what = ": ".join(part for part in (root.type, message) if part) if root else message
    culprit = findings.culprit
    if culprit is None:
        if not any(exception.frames for exception in event.exceptions):
            return f"{what} (the log carries no stack trace: no code to locate)."
        return f"{what} (no frame could be located in the repository)."
    where = f"{culprit.path}:{culprit.line}" if culprit.line else culprit.path
    sentence = f"{what} at {where}" + (f" in {culprit.function}" if culprit.function else "") + "."
    if findings.evidence:
        sentence += " Read in the code: " + "; ".join(findings.evidence) + "."
    callee = next((s for s in findings.suspects[1:] if "returns the null value" in s.reason
                   or "produced the value that failed" in s.reason), None)
    if callee:
        sentence += f" {callee.function} ({callee.path}:{callee.line}) may return the missing value."
    return sentence


def _confidence(findings: Findings) -> float:
    culprit = findings.culprit
    if culprit is None:
        return 0.1
    score = 0.35
    if findings.evidence:  # the blame was decided from code read, not from the frame's position
        score += 0.1
    if "several files" not in culprit.reason and findings.excerpt and "unverified" not in culprit.reason:
        score += 0.1
    if any("returns the null value" in s.reason or "produced the value" in s.reason for s in findings.suspects):
        score += 0.05
    return round(min(score, 0.6), 2)


def _changes(checkout: Checkout, tools: FileTools, last_good: str | None) -> tuple[str, dict[str, list[int]]]:
    """(what a suspect in a changed file is told, {path: first changed lines}) since the last good deploy,
    or in the analysed commit when that is not known (its parent is no known good deploy: a failure logged
    there too would be blamed on a change it already had); empty without history."""
    try:
        base, files = changed_lines(checkout.repo_dir, last_good, checkout.commit, tools.limits.git_timeout_s)
    except (git.GitCommandError, ValueError, OSError):
        return "", {}
    why = f"its file changed since {base[:12]}, the last good deploy" if last_good else \
        f"its file changed in the analysed commit {checkout.commit[:12]}"
    return why, files


def _suspect_commits(tools: FileTools, findings: Findings) -> list[SuspectCommit]:
    commits: dict[str, SuspectCommit] = {}
    for suspect in findings.suspects[:3]:
        if suspect.line is None:
            continue
        result = tools.blame(suspect.path, max(1, suspect.line - _BLAME_RADIUS), suspect.line + _BLAME_RADIUS)
        # The culprit line's own commit first, then its neighbours'.
        rows = sorted(result.data or (), key=lambda r: abs(r.line - (suspect.line or 0)))
        for row in rows:
            if row.sha not in commits:
                commits[row.sha] = SuspectCommit(
                    sha=row.sha, summary=row.summary, author=row.author, date=row.date, path=suspect.path
                )
    return list(commits.values())[:5]


def localise(
    cluster: Cluster,
    checkout: Checkout,
    tools: FileTools,
    in_app_prefixes: Sequence[str] = (),
    last_good: str | None = None,
    history: bool = True,
) -> Analysis:
    """A full heuristic report for a burst: culprit, ranked suspects, excerpt, validated citations, blame.

    `last_good` is the commit of the last good deploy; without it the deployed commit's own change is the
    history prior (`history=False` leaves history out).
    """
    started = time.monotonic()
    event = cluster.representative
    changed = _changes(checkout, tools, last_good) if history else ("", {})
    findings = find_suspects(event, tools, in_app_prefixes=in_app_prefixes, changed=changed)
    refs: list[CitationRef] = []
    if findings.excerpt_range:
        path, first, last = findings.excerpt_range
        refs.append(CitationRef(path=path, start_line=first, end_line=last))
    refs += [
        CitationRef(path=s.path, start_line=s.line, end_line=s.line) for s in findings.suspects[1:] if s.line
    ]
    citations, dropped = validate_citations(refs, checkout, None)
    root_cause = _root_cause_sentence(event, findings)
    if findings.excerpt and findings.excerpt_range:
        root_cause += f"\n\nCode at {findings.excerpt_range[0]}:\n{findings.excerpt}"
    return burst_analysis(
        cluster, "heuristic", checkout.commit,
        root_cause=root_cause,
        culprit=findings.location,
        suspects=list(findings.suspects),
        confidence=_confidence(findings),
        citations=citations,
        suspect_commits=_suspect_commits(tools, findings),
        notes=list(dict.fromkeys([*checkout.notes, *findings.notes, *(f"citation dropped: {d}" for d in dropped)])),
        timings={"localise_s": round(time.monotonic() - started, 4)},
    )


def localise_trace(cluster: Cluster, why: str, in_app_prefixes: Sequence[str] = ()) -> Analysis:
    """A heuristic report from the stack trace alone, for a server whose source cannot be read (`why`):
    the in-app frames ranked as in `localise`, paths as the trace gives them, no citations, flagged for
    a human look so the burst still gets an answer and someone learns the repository is missing."""
    event = cluster.representative

    def locate(frame: Frame) -> FileMatch | None:
        paths = frame_paths(frame)
        if not paths or not is_in_app(frame, in_app_prefixes):
            return None
        return FileMatch(path="/".join(paths[0]), strength=len(paths[0]), ambiguous=False)

    candidates: list[Candidate] = []
    for position, exc in enumerate(reversed(event.exceptions)):
        candidates += rank_exception(exc, position, locate)[0]
    findings = Findings(tuple(_suspect(c) for c in merge(candidates)[:_MAX_SUSPECTS]), "", None, ())
    return burst_analysis(
        cluster, "heuristic", cluster.commit,
        root_cause=_root_cause_sentence(event, findings),
        culprit=findings.location,
        suspects=list(findings.suspects),
        confidence=round(min(_confidence(findings), 0.3), 2),
        needs_review=True,
        review_reasons=[f"trace-only analysis: {why}"],
        notes=[f"{why}; analysed from the stack trace alone (paths as the trace names them, no citations)"],
    )
