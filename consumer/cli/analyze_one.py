"""`logagent analyze` at work: one event against a local repository, heuristic or with the LLM (the
command's arguments are in `consumer.cli.analyze`)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from analysis.code.filemap import FileIndex
from analysis.code.jail import shown_name, tracked_only
from analysis.code.linemap import Hunk, file_hunks, map_line
from analysis.code.localiser import localise
from analysis.code.repo import (
    Checkout,
    RepoError,
    RepoSync,
    not_in_commit_note,
    open_local,
    resolve_revision,
    typed_revision,
)
from analysis.code.tools import FileTools, ToolLimits
from analysis.errors import BadInput, LogAgentError
from analysis.event import Cluster, ErrorEvent, Frame
from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.redact import Redactor, redact_analysis, redact_event
from analysis.intake.signature import fingerprint_event
from analysis.report import Analysis
from consumer.cli.common import (
    UsageError,
    decode_config,
    open_binary,
    readable,
    say,
    terminal,
)
from consumer.settings import Settings

if TYPE_CHECKING:
    from consumer.cli.render import CodeLines

__all__ = ["analyze_event", "explain_event", "run"]

_NO_TIME = -1.0  # what decoding gives an event without a usable time (no real event is so dated)
_MAX_EVENT_BYTES = 16 * 1_048_576  # `analyze` reads one event; anything bigger is not one
_CODE_RADIUS = 4
_UNVERIFIED = "culprit line unverified"
_MAX_DEPTH = 64  # folders deep an untracked file the trace names may lie, to be named first


def _read_event(name: str, config: DecodeConfig) -> tuple[ErrorEvent, list[str]]:
    """The one event `name` holds, and what to say of how it was read (said once the analysis ran, so a
    usage error stays the one line on stderr)."""
    with open_binary(name) as handle:
        raw = handle.read(_MAX_EVENT_BYTES + 1)
    if len(raw) > _MAX_EVENT_BYTES:
        raise UsageError("the event is larger than 16 MiB")
    if not raw.strip():
        raise UsageError(f"the event is empty: {'stdin' if name == '-' else name} holds no JSON event")
    notes = []
    raw = raw.removeprefix(b"\xef\xbb\xbf")  # a byte-order mark (PowerShell writes one)
    plain = _plain_text(raw)
    if plain:
        if len(raw) > config.max_message_bytes:
            raise UsageError(f"the trace is larger than LOGAGENT_INPUT__MAX_MESSAGE_BYTES ({config.max_message_bytes} "
                             "bytes): raise it, or cut the trace")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as bad:  # as the service's DLQ says of such a record (`invalid_utf8`)
            raise UsageError(f"{'stdin' if name == '-' else name} is not UTF-8 text (invalid_utf8 at byte "
                             f"{bad.start}): give a trace as printed or one JSON log record") from bad
        raw = orjson.dumps({"message": "", "error.stack_trace": text})
        # Written into JSON, a trace grows by its escapes: the limit is the text's, checked above.
        config = config.model_copy(update={"max_message_bytes": max(config.max_message_bytes, len(raw))})
        notes.append("read as plain text (a trace or a log line as printed), not a JSON log record: it names no "
                     "time, so its analysis id differs from run to run")
    try:
        events = decode_message(raw.strip(), config, received_at=_NO_TIME)
    except BadInput as bad:
        source = "stdin" if name == "-" else name
        lines = [line for line in raw.splitlines() if line.strip()]
        if bad.reason == "not_json" and len(lines) > 1 and _all_json(lines):
            raise UsageError(f"{source} holds {len(lines)} JSON lines: analyze reads one event (pick one line, e.g. "
                             "with sed -n 1p)") from bad
        raise UsageError(f"{source} is not a valid event ({bad}): give one JSON log record with a message or an "
                         "exception, in a shape the README's Input section lists, or a trace as printed") from bad
    if not events:
        raise UsageError("the event carries no log record")
    if len(events) > 1:  # an OTLP export: the service counts each record into its burst
        notes.append(f"the message holds {len(events)} log records; analysing the first (logagent redact prints "
                     "them all)")
    if events[0].timestamp != _NO_TIME:
        return events[0], notes
    # The service reads the Kafka record's time; here the time now stands in, so the id is not the same twice.
    if not plain:  # (plain text was said to name no time)
        notes.append("the event has no usable timestamp: the time now stands in, so its analysis id differs from "
                     "run to run")
    return dataclasses.replace(events[0], timestamp=time.time()), notes


def _plain_text(raw: bytes) -> bool:
    """Whether `raw` is a trace or log line as printed, not JSON: it opens no object, and no array either
    unless it parses (`[2024-05-01 12:00:00] ERROR …` is a log line)."""
    start = raw.lstrip()[:1]
    if start != b"[":
        return start != b"{"
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return True
    return False


def _all_json(lines: list[bytes]) -> bool:
    try:
        for line in lines:
            orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


def _checkout(repo: Path, commit: str | None, event_commit: str | None) -> Checkout:
    """The checkout to read: `--commit`, else the event's commit when the repo has it, else the tree
    (`_align` then says what that means for the trace's lines)."""
    if not repo.is_dir():
        raise UsageError(f"{repo} is a file, not a repository's folder" if repo.exists() else
                         f"no such repository directory: {repo}")
    try:
        if commit is not None:  # typed: `HEAD~1` too
            return open_local(repo, typed_revision(repo, commit) or commit)
        if event_commit:
            try:
                return open_local(repo, event_commit)
            except RepoError:
                pass
        return open_local(repo)
    except RepoError as exc:
        raise UsageError(str(exc)) from exc


@dataclasses.dataclass(frozen=True, slots=True)
class _Alignment:
    """How the trace's line numbers relate to the analysed commit."""

    notes: tuple[str, ...] = ()
    changed: frozenset[tuple[str, int]] = frozenset()
    """(path, line) of trace lines whose code changed between the event's commit and the analysed one."""
    unverified: str = ""
    """Why no line of the trace can be trusted at the analysed commit, when none can."""


def _align(event: ErrorEvent, checkout: Checkout, limits: ToolLimits) -> tuple[ErrorEvent, _Alignment]:
    """`event` with its frames' lines moved to where that code is at the analysed commit."""
    if not event.commit:
        return event, _Alignment()
    logged = resolve_revision(checkout.repo_dir, event.commit)
    if logged == checkout.commit:
        return event, _Alignment()
    at = checkout.commit[:12]
    if logged is None:
        why = (f"the event was logged at commit {event.commit[:40]}, which the repository does not have; "
               f"its line numbers were read at {at} as they are")
        return event, _Alignment((why,), unverified=why)
    index = FileIndex.build(checkout.root, limits.skip_dirs, visible=tracked_only(checkout.tracked))
    hunks: dict[str, list[Hunk] | None] = {}
    changed: set[tuple[str, int]] = set()
    moved = 0

    def move(frame: Frame) -> Frame:
        nonlocal moved
        match = index.locate(frame) if frame.lineno else None
        if match is None or frame.lineno is None:
            return frame
        if match.path not in hunks:
            hunks[match.path] = file_hunks(checkout.repo_dir, match.path, logged, checkout.commit)
        diff = hunks[match.path]
        line = map_line(diff, frame.lineno) if diff is not None else None
        if line is None:
            changed.add((match.path, frame.lineno))
            return frame
        moved += line != frame.lineno
        return dataclasses.replace(frame, lineno=line)

    chain = tuple(dataclasses.replace(exc, frames=tuple(move(f) for f in exc.frames)) for exc in event.exceptions)
    note = (f"analysed at {at}, not at the event's commit {logged[:12]}: the trace's lines were mapped through "
            f"the diff ({moved} moved, {len(changed)} changed)")
    return dataclasses.replace(event, exceptions=chain), _Alignment((note,), frozenset(changed))


def _guarded(analysis: Analysis, alignment: _Alignment, checkout: Checkout) -> Analysis:
    """`analysis` with the alignment's notes, and its culprit marked unverified when its line may be wrong:
    changed since the event's commit, or (in a working tree) in a file not as committed."""
    culprit = analysis.culprit
    why = alignment.unverified
    if culprit is not None and culprit.line is not None and (culprit.path, culprit.line) in alignment.changed:
        why = f"{culprit.path}:{culprit.line} changed since the event's commit"
    if culprit is not None and checkout.other_lines(culprit.path):
        why = (f"{culprit.path} has uncommitted changes: the line is the working tree's, not "
               f"{checkout.commit[:12]}'s")
    update: dict[str, Any] = {"notes": [*analysis.notes, *alignment.notes]}
    if why and culprit is not None:
        update |= {"needs_review": True, "review_reasons": [*analysis.review_reasons, f"{_UNVERIFIED}: {why}"]}
    return analysis.model_copy(update=update)


_SOURCE_SUFFIXES = (".py", ".java", ".kt", ".scala", ".groovy", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".go",
                    ".rb", ".cs", ".php", ".rs", ".swift", ".c", ".cc", ".cpp", ".h")


def _with_files_not_in_commit(event: ErrorEvent, checkout: Checkout) -> Checkout:
    """`checkout` with notes saying which of a working tree's files are not in its commit, so not read: those
    the trace names first (and what to do), then the others."""
    depth = min(_MAX_DEPTH, max((name.count("/") + 1 for name in checkout.untracked), default=0))
    tails = set()  # the last 1..depth parts of every path a frame names: one set lookup per file not in the commit
    for exc in event.exceptions:
        for frame in exc.frames:
            parts = (frame.abs_path or frame.filename).replace("\\", "/").split("/")
            tails |= {"/".join(parts[-count:]) for count in range(1, min(depth, len(parts)) + 1)}
    named = [name for name in checkout.untracked if name in tails]
    # Code first: a module not yet committed matters more than the logs and outputs beside it.
    others = sorted((name for name in checkout.untracked if name not in tails),
                    key=lambda name: not name.endswith(_SOURCE_SUFFIXES))
    notes = [not_in_commit_note(others, checkout.commit)] if others else []
    if named:
        shown, one = " and ".join(map(shown_name, named[:3])), len(named) == 1
        notes.insert(0, f"the trace's {shown} {'is' if one else 'are'} not in commit {checkout.commit[:12]}, so not "
                        f"read: commit {'it' if one else 'them'} to analyse {'it' if one else 'them'}")
    return dataclasses.replace(checkout, notes=(*notes, *checkout.notes)) if notes else checkout


def _single_burst(event: ErrorEvent, checkout: Checkout, settings: Settings) -> Cluster:
    """`event` as a burst of one at the checked-out commit."""
    signature = fingerprint_event(event, settings.input.in_app_prefixes)
    return Cluster(
        server_id=event.server_id, tenant=event.tenant, fingerprint=signature.fingerprint,
        exception_type=signature.exception_type or event.exception_type, first_seen=event.timestamp,
        last_seen=event.timestamp, count=1, commits=(checkout.commit,), samples=(event,),
    )


def analyze_event(event: ErrorEvent, repo: Path, commit: str | None, settings: Settings) -> Analysis:
    """The heuristic analysis of one event as a burst of one, read from `repo`."""
    return _run(event, repo, commit, settings, llm=False)[0]


def explain_event(event: ErrorEvent, repo: Path, commit: str | None, settings: Settings) -> Analysis:
    """The LLM analysis of one event (localiser, then the agent on Ollama at `settings.ollama.url`).

    The memory is left alone: an ad-hoc run neither recalls nor stores. When Ollama cannot answer, the
    heuristic analysis comes back with a note saying so.
    """
    return _run(event, repo, commit, settings, llm=True)[0]


def _run(event: ErrorEvent, repo: Path, commit: str | None, settings: Settings, *,
         llm: bool) -> tuple[Analysis, Checkout, _Alignment]:
    """The analysis of `event`, the checkout it read, and how the trace's lines were aligned to it."""
    checkout = _checkout(repo, commit, event.commit)
    checkout = _with_files_not_in_commit(event, checkout)
    event, alignment = _align(event, checkout, settings.tools)
    cluster = _single_burst(event, checkout, settings)
    if llm:
        from consumer.explainer import build_explainer
        from consumer.metrics import Metrics

        # No server map is read: the repository is the one given on the command line.
        repo_sync = RepoSync(settings.repo.model_copy(update={"servers": {}}))
        analysis = build_explainer(settings, Metrics(), repo_sync, with_memory=False).explain(cluster, checkout)
    else:
        tools = FileTools(checkout.root, ToolLimits(), repo_dir=checkout.repo_dir, commit=checkout.commit,
                          tracked=checkout.tracked)
        analysis = localise(cluster, checkout, tools, settings.input.in_app_prefixes)
    # As in the service, nothing leaves unredacted: the code the localiser quoted included.
    return redact_analysis(_guarded(analysis, alignment, checkout), Redactor(settings.redaction)), checkout, alignment


def _code_around(checkout: Checkout, analysis: Analysis, redactor: Redactor) -> CodeLines | None:
    """The culprit's lines as the analysis read them, redacted; None when they cannot be read."""
    from consumer.cli.render import CodeLines

    culprit = analysis.culprit
    if culprit is None or culprit.line is None:
        return None
    tools = FileTools(checkout.root, ToolLimits(), repo_dir=checkout.repo_dir, commit=checkout.commit,
                      tracked=checkout.tracked)
    first = max(1, culprit.line - _CODE_RADIUS)
    result = tools.read_file(culprit.path, first, culprit.line + _CODE_RADIUS)
    if result.status != "ok" or result.data is None:
        return None
    lines = tuple(redactor.redact(line) for line in result.data.lines)
    return CodeLines(culprit.path, result.data.start_line, lines, culprit.line)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """`logagent analyze`: one event against a local repository (see `consumer.cli.analyze`)."""
    # The service redacts every event before analysis; so does `analyze`, whatever prints or prompts it.
    redactor = Redactor(settings.redaction)
    server = args.server or args.repo.resolve().name
    event, notes = _read_event(args.event, decode_config(settings, default_server_id=server))
    if args.server and event.server_id != args.server:
        event = dataclasses.replace(event, server_id=args.server)
    event = redact_event(event, redactor)
    use_llm = not args.offline and bool(settings.ollama.url)
    try:
        analysis, checkout, alignment = _run(event, args.repo, args.commit, settings, llm=use_llm)
    except LogAgentError as exc:
        raise UsageError(f"analysis failed: {exc}") from exc
    for note in (*notes, *alignment.notes):  # said before the answer, whatever the output mode: they qualify it
        say(note)
    if not readable(args):
        sys.stdout.write(analysis.model_dump_json() + "\n")
        return 0
    from consumer.cli.render import print_analysis

    print_analysis(terminal(), analysis, _code_around(checkout, analysis, redactor))
    return 0
