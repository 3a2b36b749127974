"""`logagent analyze`: one event against a local repository, heuristic or with the LLM."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analysis.code.localiser import localise
from analysis.code.repo import Checkout, RepoError, open_local
from analysis.code.tools import FileTools, ToolLimits
from analysis.errors import BadInput, LogAgentError
from analysis.event import Cluster, ErrorEvent
from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.redact import Redactor, redact_event
from analysis.intake.signature import fingerprint_event
from analysis.report import Analysis
from consumer.cli.common import UsageError, decode_config, open_binary
from consumer.settings import Settings

__all__ = ["analyze_event", "explain_event", "register"]

_MAX_EVENT_BYTES = 16 * 1_048_576  # `analyze` reads one event; anything bigger is not one


def register(commands: Any) -> None:
    """Add `analyze` to the subcommands."""
    analyze = commands.add_parser("analyze", help="analyse one event against a local repository")
    analyze.add_argument("--repo", required=True, type=Path, help="path of the service's git repository")
    analyze.add_argument("--commit", help="commit to analyse at (default: the event's, else the work tree)")
    analyze.add_argument("--event", default="-", help="file holding one event, or - for stdin (default)")
    analyze.add_argument("--offline", action="store_true",
                         help="heuristic localiser only; without it the LLM at LOGAGENT_OLLAMA_URL is used "
                              "when set (the heuristic answer, with a note, when it cannot be reached)")
    analyze.set_defaults(handler=_analyze)


def _read_event(name: str, config: DecodeConfig) -> ErrorEvent:
    with open_binary(name) as handle:
        raw = handle.read(_MAX_EVENT_BYTES + 1)
    if len(raw) > _MAX_EVENT_BYTES:
        raise UsageError("the event is larger than 16 MiB")
    try:
        events = decode_message(raw.strip(), config)
    except BadInput as bad:
        raise UsageError(f"not a valid event ({bad.reason})") from bad
    if not events:
        raise UsageError("the event carries no log record")
    return events[0]


def _checkout(repo: Path, commit: str | None, event_commit: str | None) -> tuple[Checkout, list[str]]:
    """The checkout to read: `--commit`, else the event's commit when the repo has it, else the tree."""
    if not repo.is_dir():
        raise UsageError(f"no such repository directory: {repo}")
    try:
        if commit is not None:
            return open_local(repo, commit), []
        if event_commit:
            try:
                return open_local(repo, event_commit), []
            except RepoError:
                note = f"the event's commit {event_commit[:40]} is not in the repository; read the work tree"
                return open_local(repo), [note]
        return open_local(repo), []
    except RepoError as exc:
        raise UsageError(str(exc)) from exc


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
    checkout, notes = _checkout(repo, commit, event.commit)
    cluster = _single_burst(event, checkout, settings)
    tools = FileTools(checkout.root, ToolLimits(), repo_dir=checkout.repo_dir, commit=checkout.commit)
    analysis = localise(cluster, checkout, tools, settings.input.in_app_prefixes)
    return _with_notes(analysis, notes)


def explain_event(event: ErrorEvent, repo: Path, commit: str | None, settings: Settings) -> Analysis:
    """The LLM analysis of one event (localiser, then the agent on Ollama at `settings.ollama.url`).

    The memory is left alone: an ad-hoc run neither recalls nor stores. When Ollama cannot answer, the
    heuristic analysis comes back with a note saying so.
    """
    from analysis.code.repo import RepoSync
    from consumer.explainer import build_explainer
    from consumer.metrics import Metrics

    checkout, notes = _checkout(repo, commit, event.commit)
    cluster = _single_burst(event, checkout, settings)
    # No server map is read: the repository is the one given on the command line.
    repo_sync = RepoSync(settings.repo.model_copy(update={"servers": {}}))
    explainer = build_explainer(settings, Metrics(), repo_sync, with_memory=False)
    return _with_notes(explainer.explain(cluster, checkout), notes)


def _with_notes(analysis: Analysis, notes: Sequence[str]) -> Analysis:
    return analysis.model_copy(update={"notes": [*analysis.notes, *notes]}) if notes else analysis


def _analyze(args: argparse.Namespace, settings: Settings) -> int:
    # The service redacts every event before analysis; so does `analyze`, whatever prints or prompts it.
    event = redact_event(_read_event(args.event, decode_config(settings)), Redactor(settings.redaction))
    use_llm = not args.offline and bool(settings.ollama.url)
    try:
        if use_llm:
            analysis = explain_event(event, args.repo, args.commit, settings)
        else:
            analysis = analyze_event(event, args.repo, args.commit, settings)
    except LogAgentError as exc:
        raise UsageError(f"analysis failed: {exc}") from exc
    sys.stdout.write(analysis.model_dump_json() + "\n")
    return 0
