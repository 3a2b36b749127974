"""`logagent`: the one entry point. Settings are built once here and passed down.

User errors (bad input, missing repository, invalid settings) end with a one-line message on stderr and
exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import orjson
from pydantic import ValidationError

from analysis.decode import DecodeConfig, decode_message
from analysis.errors import BadInput, LogAgentError
from analysis.event import Cluster, ErrorEvent
from analysis.localiser import localise
from analysis.repo import Checkout, RepoConfig, RepoError, open_local
from analysis.report import Analysis
from analysis.signature import describe, fingerprint_event
from analysis.tools import FileTools, ToolLimits
from consumer.settings import Settings

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
    analyze.add_argument("--offline", action="store_true", help="heuristic localiser only, no LLM")
    analyze.set_defaults(handler=_analyze)

    memory = commands.add_parser("memory", help="inspect and edit the error memory")
    memory_commands = memory.add_subparsers(dest="memory_command", required=True, metavar="ACTION")
    search = memory_commands.add_parser("search", help="find past analyses similar to a text")
    search.add_argument("query")
    search.add_argument("--server", help="restrict to one server id")
    search.set_defaults(handler=_not_available)
    listing = memory_commands.add_parser("list", help="list stored analyses")
    listing.add_argument("--server", help="restrict to one server id")
    listing.set_defaults(handler=_not_available)
    forget = memory_commands.add_parser("forget", help="delete a stored analysis")
    forget.add_argument("memory_id")
    forget.set_defaults(handler=_not_available)

    feedback = commands.add_parser("feedback", help="record a verdict on an analysis")
    feedback.add_argument("analysis_id")
    feedback.add_argument("--verdict", required=True, choices=["correct", "wrong"])
    feedback.add_argument("--note", default="", help="free text kept with the verdict")
    feedback.set_defaults(handler=_not_available)
    return parser


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


# --- run and demo --------------------------------------------------------------------------------------

def repo_config(settings: Settings) -> RepoConfig:
    """Where repositories are cached and which server maps to which repository."""
    # TODO(lead): take the servers from the settings once Settings composes RepoConfig.
    return RepoConfig(cache_dir=settings.data_dir / "repos")


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from consumer.demo import make_analyzer  # the service's imports are only needed by these commands
    from consumer.pipeline import run_service

    return run_service(settings, make_analyzer(settings, repo_config(settings)))


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


def analyze_event(event: ErrorEvent, repo: Path, commit: str | None, settings: Settings) -> Analysis:
    """The heuristic analysis of one event as a burst of one, read from `repo`."""
    prefixes = settings.input.in_app_prefixes
    signature = fingerprint_event(event, prefixes)
    checkout, notes = _checkout(repo, commit, event.commit)
    cluster = Cluster(
        server_id=event.server_id, tenant=event.tenant, fingerprint=signature.fingerprint,
        exception_type=signature.exception_type or event.exception_type, first_seen=event.timestamp,
        last_seen=event.timestamp, count=1, commits=(checkout.commit,), samples=(event,),
    )
    tools = FileTools(checkout.root, ToolLimits(), repo_dir=checkout.repo_dir, commit=checkout.commit)
    analysis = localise(cluster, checkout, tools, prefixes)
    return analysis.model_copy(update={"notes": [*analysis.notes, *notes]}) if notes else analysis


def _analyze(args: argparse.Namespace, settings: Settings) -> int:
    event = _read_event(args.event, decode_config(settings))
    # TODO(lead): without --offline and with settings.ollama.url set, run the agent here instead.
    try:
        analysis = analyze_event(event, args.repo, args.commit, settings)
    except LogAgentError as exc:
        raise UsageError(f"analysis failed: {exc}") from exc
    sys.stdout.write(analysis.model_dump_json() + "\n")
    return 0


# --- memory and feedback -------------------------------------------------------------------------------

def _not_available(args: argparse.Namespace, settings: Settings) -> int:
    # TODO(lead): wire `memory search|list|forget` and `feedback` to the store.
    name = args.command if args.command != "memory" else f"memory {args.memory_command}"
    raise UsageError(f"'{name}' is not available yet")


if __name__ == "__main__":
    raise SystemExit(main())
