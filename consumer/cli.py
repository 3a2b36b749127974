"""`logagent`: the one entry point. Settings are built once here and passed down.

User errors (bad input, missing repository, invalid settings) end with a one-line message on stderr and
exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import orjson
from pydantic import ValidationError

from analysis.decode import DecodeConfig, decode_message
from analysis.errors import BadInput, LogAgentError
from analysis.event import Cluster, ErrorEvent
from analysis.localiser import localise
from analysis.redact import Redactor, redact_event
from analysis.repo import Checkout, RepoError, open_local
from analysis.report import Analysis
from analysis.signature import describe, fingerprint_event
from analysis.tools import FileTools, ToolLimits
from consumer.settings import Settings

if TYPE_CHECKING:
    from store import CaseSummary, MemoryStore

__all__ = ["UsageError", "main"]

_USER_ERROR = 2
_MAX_EVENT_BYTES = 16 * 1_048_576  # `analyze` reads one event; anything bigger is not one


class UsageError(Exception):
    """A mistake the user can fix; printed as one line, exit code 2."""


Handler = Callable[[argparse.Namespace, Settings], int]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv`, build the settings once and run the subcommand; returns the exit code."""
    args = _parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        settings = Settings()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return _fail(f"invalid setting {where}: {first['msg']} (check the LOGAGENT_* environment)")
    try:
        return handler(args, settings)
    except UsageError as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        return 130


def _fail(message: str) -> int:
    print(f"logagent: {message}", file=sys.stderr)
    return _USER_ERROR


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="logagent", description="Groups bursts of production errors and explains each from the source.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run the service (Kafka in, analysis events out)")
    run.set_defaults(handler=_run)

    demo = commands.add_parser("demo", help="the whole flow on an embedded broker and sample repositories")
    demo.add_argument("--events", type=_positive_int, default=3_000, help="events to produce (default 3000)")
    demo.add_argument("--seed", type=int, default=7, help="seed of the generated stream (default 7)")
    demo.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the drain")
    demo.set_defaults(handler=_demo)

    fingerprint = commands.add_parser(
        "fingerprint", help="print the signature of each event (JSON lines in, JSON lines out)",
        description="One output line per input line, in order: the signature, or {\"error\": reason} for a "
                    "line that is not a valid event. For an OpenTelemetry line carrying several records, the "
                    "first record's signature is printed with \"records\": N.")
    fingerprint.add_argument("file", nargs="?", default="-", help="JSON lines file, or - for stdin (default)")
    fingerprint.set_defaults(handler=_fingerprint)

    analyze = commands.add_parser("analyze", help="analyse one event against a local repository")
    analyze.add_argument("--repo", required=True, type=Path, help="path of the service's git repository")
    analyze.add_argument("--commit", help="commit to analyse at (default: the event's, else the work tree)")
    analyze.add_argument("--event", default="-", help="file holding one event, or - for stdin (default)")
    analyze.add_argument("--offline", action="store_true",
                         help="heuristic localiser only; without it the LLM at LOGAGENT_OLLAMA_URL is used "
                              "when set (the heuristic answer, with a note, when it cannot be reached)")
    analyze.set_defaults(handler=_analyze)

    memory = commands.add_parser(
        "memory", help="inspect and edit the error memory",
        description="Reads and edits the memory under LOGAGENT_DATA_DIR (or LOGAGENT_MEMORY__URI). Output is "
                    "JSON lines; an unknown analysis id exits 1, a store error exits 2.")
    memory_commands = memory.add_subparsers(dest="memory_command", required=True, metavar="ACTION")
    listing = memory_commands.add_parser("list", help="list stored analyses of a server, newest first")
    listing.add_argument("--server", required=True, help="server id")
    listing.add_argument("--tenant", help="only this tenant")
    listing.add_argument("--limit", type=_positive_int, default=50, help="most rows to print (default 50)")
    listing.set_defaults(handler=_memory_list)
    search = memory_commands.add_parser("search", help="find stored analyses similar to a text")
    search.add_argument("text", help="error text to compare with")
    search.add_argument("--server", required=True, help="server id")
    search.add_argument("--tenant", help="only this tenant")
    search.add_argument("-k", type=_positive_int, default=10, help="most rows to print (default 10)")
    search.set_defaults(handler=_memory_search)
    forget = memory_commands.add_parser("forget", help="delete a stored analysis")
    forget.add_argument("analysis_id")
    forget.add_argument("--server", help="server id (default: search every server's memory)")
    forget.set_defaults(handler=_memory_forget)

    feedback = commands.add_parser(
        "feedback", help="record a verdict on an analysis",
        description="Applies the verdict to the memory under LOGAGENT_DATA_DIR: 'correct' raises the case to "
                    "human-confirmed trust, 'wrong' lowers its weight (or forgets it when "
                    "LOGAGENT_MEMORY__FORGET_ON_WRONG=true). With --via-kafka the verdict is published to the "
                    "feedback topic instead, for the running service to apply. Unknown id: exit 1.")
    feedback.add_argument("analysis_id")
    feedback.add_argument("--verdict", required=True, choices=["correct", "wrong"])
    feedback.add_argument("--note", default="", help="free text kept with the verdict")
    feedback.add_argument("--server", help="server id (default: search every server's memory)")
    feedback.add_argument("--via-kafka", action="store_true",
                          help="publish to LOGAGENT_KAFKA__FEEDBACK_TOPIC instead of editing the memory here")
    feedback.set_defaults(handler=_feedback)
    return parser


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


# --- run and demo --------------------------------------------------------------------------------------

def _run(args: argparse.Namespace, settings: Settings) -> int:
    from consumer.runner import run_service  # the service's imports are only needed by this command

    return run_service(settings)


def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from consumer.broker import BrokerError
    from consumer.demo import run_demo

    try:
        return run_demo(settings, events=args.events, seed=args.seed, timeout_s=args.timeout)
    except BrokerError as exc:
        raise UsageError(str(exc)) from exc


# --- fingerprint ---------------------------------------------------------------------------------------

@contextmanager
def _open_binary(name: str) -> Iterator[BinaryIO]:
    if name == "-":
        yield sys.stdin.buffer
        return
    try:
        handle = Path(name).open("rb")  # noqa: SIM115 - closed by the context manager below
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc.strerror or exc}") from exc
    with handle:
        yield handle


def decode_config(settings: Settings) -> DecodeConfig:
    """The decoder limits from the settings."""
    limits = settings.input
    return DecodeConfig(max_message_bytes=limits.max_message_bytes, max_depth=limits.max_depth,
                        commit_field=limits.commit_field)


def fingerprint_line(line: bytes, config: DecodeConfig, in_app_prefixes: Sequence[str]) -> dict[str, object]:
    """The output object for one input line: the first record's signature, or `{"error": reason}`."""
    if not line.strip():
        return {"error": "empty_line"}
    try:
        events = decode_message(line, config)
    except BadInput as bad:
        return {"error": bad.reason}
    if not events:
        return {"error": "no_records"}
    out = describe(fingerprint_event(events[0], in_app_prefixes))
    if len(events) > 1:
        out["records"] = len(events)
    return out


def _fingerprint(args: argparse.Namespace, settings: Settings) -> int:
    config = decode_config(settings)
    prefixes = settings.input.in_app_prefixes
    out = sys.stdout.buffer
    with _open_binary(args.file) as lines:
        for raw in lines:
            result = fingerprint_line(raw.rstrip(b"\r\n"), config, prefixes)
            out.write(orjson.dumps(result) + b"\n")
            out.flush()  # a user piping a live stream sees each answer as its line arrives
    return 0


# --- analyze -------------------------------------------------------------------------------------------

def _read_event(name: str, config: DecodeConfig) -> ErrorEvent:
    with _open_binary(name) as handle:
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
    from analysis.repo import RepoSync
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


# --- memory and feedback -------------------------------------------------------------------------------

_NOT_FOUND = 1


def _open_memory(settings: Settings) -> MemoryStore:
    from consumer.explainer import build_embedder  # LanceDB and the embedder load only for these commands
    from store import MemoryStore

    return MemoryStore(settings.memory, build_embedder(settings))


@contextmanager
def _store_errors() -> Iterator[None]:
    """Store failures end as one line and exit code 2, like every user-facing error."""
    from store import StoreError

    try:
        yield
    except (StoreError, OSError, ValueError) as exc:
        raise UsageError(f"memory error: {_first_line(exc)}") from exc


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0][:300] if lines else type(error).__name__


def _print_rows(rows: Sequence[CaseSummary]) -> None:
    out = sys.stdout.buffer
    for row in rows:
        out.write(orjson.dumps(dataclasses.asdict(row)) + b"\n")
    out.flush()


def _memory_list(args: argparse.Namespace, settings: Settings) -> int:
    with _store_errors():
        rows = _open_memory(settings).list_cases(args.server, args.tenant, args.limit)
    _print_rows(rows)
    return 0


def _memory_search(args: argparse.Namespace, settings: Settings) -> int:
    with _store_errors():
        rows = _open_memory(settings).search(args.server, args.tenant, args.text, args.k)
    _print_rows(rows)
    return 0


def _not_found(analysis_id: str) -> int:
    print(f"logagent: no analysis {analysis_id!r} in the memory", file=sys.stderr)
    return _NOT_FOUND


def _memory_forget(args: argparse.Namespace, settings: Settings) -> int:
    with _store_errors():
        deleted = _open_memory(settings).forget(args.analysis_id, server=args.server)
    if not deleted:
        return _not_found(args.analysis_id)
    sys.stdout.write(orjson.dumps({"analysis_id": args.analysis_id, "forgotten": deleted}).decode() + "\n")
    return 0


def _feedback(args: argparse.Namespace, settings: Settings) -> int:
    if args.via_kafka:
        return _publish_feedback(args, settings)
    with _store_errors():
        found = _open_memory(settings).feedback(args.server, args.analysis_id, args.verdict, args.note)
    if not found:
        return _not_found(args.analysis_id)
    sys.stdout.write(orjson.dumps({"analysis_id": args.analysis_id, "verdict": args.verdict,
                                   "applied": True}).decode() + "\n")
    return 0


def _publish_feedback(args: argparse.Namespace, settings: Settings) -> int:
    import asyncio

    from aiokafka.errors import KafkaError

    from consumer.feedback import Feedback, publish_feedback

    feedback = Feedback(args.analysis_id, args.verdict, args.note, args.server)
    try:
        asyncio.run(asyncio.wait_for(publish_feedback(settings, feedback), timeout=60))
    except (KafkaError, TimeoutError) as exc:
        raise UsageError(f"cannot publish to {settings.kafka.feedback_topic}: {type(exc).__name__}") from exc
    sys.stdout.write(orjson.dumps({"analysis_id": args.analysis_id, "verdict": args.verdict,
                                   "published": settings.kafka.feedback_topic}).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
