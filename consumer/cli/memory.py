"""`logagent memory servers|list|search|show|forget` and `logagent feedback`: reading and correcting the
error memory."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import re
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from consumer.cli.common import (
    UsageError,
    add_command,
    add_output_flags,
    first_line,
    positive_int,
    readable,
    say,
    terminal,
)
from consumer.settings import Settings

if TYPE_CHECKING:
    from store import MemoryStore

__all__ = ["register"]

_NOT_FOUND = 1
_UUID = re.compile(r"[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}")
_ID_START = re.compile(r"[0-9a-f-]{8,35}")  # the first characters of one: `feedback e75231f8`
_RUST_SOURCE = re.compile(r",? /\S+\.rs:\d+:\d+")  # where in LanceDB's Rust source an error was raised
_WHERE = ("Reads the memory under LOGAGENT_DATA_DIR (or LOGAGENT_MEMORY__URI). On a terminal the output is "
          "readable; --json (or a pipe) gives JSON. ")


def register(commands: Any) -> None:
    """Add `memory` and `feedback` to the subcommands."""
    memory = add_command(
        commands, "memory", summary="browse and edit the error memory",
        description=_WHERE + "An empty result says so on stderr and exits 0; an unknown analysis id exits 1; "
                             "a store error exits 2.",
        examples=["logagent memory servers", "logagent memory list --server checkout-service",
                  "logagent memory show 1c2f0a9e-...", "logagent memory search 'customer is null' --json"])
    actions = memory.add_subparsers(dest="memory_command", required=True, metavar="ACTION")
    servers = add_command(
        actions, "servers", summary="servers and tenants with memory: cases, newest case, expired",
        description=_WHERE + "One row per server and tenant: how many cases, when the newest was stored, and how "
                             "many are past their TTL (never recalled; maintenance deletes them).",
        examples=["logagent memory servers", "logagent memory servers --json | jq -s 'map(.cases) | add'"])
    servers.set_defaults(handler=_memory_servers)
    listing = add_command(
        actions, "list", summary="stored cases, newest first",
        description=_WHERE + "Each case with its verdict, culprit and the first line of its root cause.",
        examples=["logagent memory list --server checkout-service --tenant acme",
                  "logagent memory list --limit 5"])
    _scope_flags(listing)
    listing.add_argument("--limit", "-k", dest="k", type=positive_int, default=50,
                         help="most cases to print (default 50)")
    listing.set_defaults(handler=_memory_list)
    search = add_command(
        actions, "search", summary="stored cases most similar to a text",
        description=_WHERE + "Ranks cases by the cosine similarity of their error text to TEXT (score 0-1).",
        examples=["logagent memory search 'NullPointerException customer is null' --server checkout-service",
                  "logagent memory search 'KeyError price' --limit 3 --json"])
    search.add_argument("text", help="error text to compare with")
    _scope_flags(search)
    search.add_argument("--limit", "-k", dest="k", type=positive_int, default=10,
                        help="most cases to print (default 10)")
    search.set_defaults(handler=_memory_search)
    show = add_command(
        actions, "show", summary="one case in full: analysis, verdicts, trust history, staleness",
        description=_WHERE + "Staleness is judged by age; with --repo, also by whether the lines the case "
                             "cites changed between its commit and the repository's (HEAD, or --commit).",
        examples=["logagent memory show 1c2f0a9e-...",
                  "logagent memory show 1c2f0a9e-... --repo ~/src/checkout --commit origin/main"])
    _id_flags(show)
    show.add_argument("--repo", type=Path, help="the service's git repository, to compare cited lines with")
    show.add_argument("--commit", help="commit of --repo to compare with (default HEAD)")
    show.set_defaults(handler=_memory_show)
    forget = add_command(
        actions, "forget", summary="delete a stored case and its verdicts",
        description=_WHERE + "The case is no longer recalled, and its verdict notes go with it.",
        examples=["logagent memory forget 1c2f0a9e-...", "logagent memory forget 1c2f0a9e-... --server orders"])
    _id_flags(forget)
    forget.set_defaults(handler=_memory_forget)
    for action in (servers, listing, search, show, forget):
        add_output_flags(action)

    feedback = add_command(
        commands, "feedback", summary="record a verdict on an analysis",
        description="Applies the verdict to the memory under LOGAGENT_DATA_DIR: 'correct' raises the case to "
                    "human-confirmed trust, 'wrong' lowers its weight (or forgets it when "
                    "LOGAGENT_MEMORY__FORGET_ON_WRONG=true). The next analyses that recall the case carry the "
                    "verdict and its note, and the model is told a 'wrong' case's conclusion was rejected. With "
                    "--via-kafka the verdict is published to the feedback topic instead, for the running "
                    "service to apply. Unknown id: exit 1.",
        examples=["logagent feedback 1c2f0a9e-... --verdict wrong --note 'the null comes from the cache'",
                  "logagent feedback 1c2f0a9e-... --verdict correct --via-kafka"])
    _id_flags(feedback)
    feedback.add_argument("--verdict", required=True, choices=["correct", "wrong"])
    feedback.add_argument("--note", default="", help="why: kept with the verdict and shown to the model")
    feedback.add_argument("--tenant", help="judge the case only if it is this tenant's")
    feedback.add_argument("--via-kafka", action="store_true",
                          help="publish to LOGAGENT_KAFKA__FEEDBACK_TOPIC instead of editing the memory here")
    add_output_flags(feedback)
    feedback.set_defaults(handler=_feedback)


def _scope_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", help="only this server (default: every server)")
    parser.add_argument("--tenant", help="only this tenant")


def _id_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("analysis_id", help="the analysis id (as `memory list` shows it)")
    parser.add_argument("--server", help="server id (default: search every server's memory)")


def _open_memory(settings: Settings) -> MemoryStore:
    from consumer.embedder import build_embedder  # LanceDB and the embedder load only for these commands
    from store import MemoryStore

    return MemoryStore(settings.memory, build_embedder(settings))


def _missing(settings: Settings) -> bool:
    """True, said on stderr, when the memory is a local directory that does not exist."""
    uri = settings.memory.uri
    if "://" in uri or Path(uri).exists():
        return False
    say(f"no memory at {uri}: nothing has been stored there (is LOGAGENT_DATA_DIR or LOGAGENT_MEMORY__URI "
        "pointing elsewhere?)")
    return True


def _nothing(settings: Settings, what: str, server: str | None, tenant: str | None) -> None:
    scope = f"server {server!r}" if server else "any server"
    scope += f", tenant {tenant!r}" if tenant else ", any tenant"
    say(f"no {what} ({scope}) in the memory at {settings.memory.uri}")


@contextmanager
def _store_errors() -> Iterator[None]:
    """Store failures end as one line and exit code 2, like every user-facing error."""
    from store import StoreError

    try:
        yield
    except (StoreError, OSError, ValueError, RuntimeError) as exc:  # LanceDB's I/O faults are RuntimeErrors
        raise UsageError(f"memory error: {_RUST_SOURCE.sub('', first_line(exc))}") from exc


def _json_lines(rows: Sequence[Any]) -> None:
    out = sys.stdout.buffer
    for row in rows:
        out.write(orjson.dumps(row if isinstance(row, dict) else dataclasses.asdict(row)) + b"\n")
    out.flush()


def _memory_servers(args: argparse.Namespace, settings: Settings) -> int:
    if _missing(settings):
        return 0
    with _store_errors():
        rows = _open_memory(settings).servers(time.time())
    if not rows:
        _nothing(settings, "cases", None, None)
    elif readable(args):
        from consumer.cli.render import print_servers

        print_servers(terminal(), rows)
    else:
        _json_lines(rows)
    return 0


def _print_cases(args: argparse.Namespace, settings: Settings, rows: Sequence[Any]) -> int:
    if not rows:
        _nothing(settings, "cases", args.server, args.tenant)
    elif readable(args):
        from consumer.cli.render import print_cases

        print_cases(terminal(), rows)
    else:
        _json_lines(rows)
    return 0


def _memory_list(args: argparse.Namespace, settings: Settings) -> int:
    if _missing(settings):
        return 0
    with _store_errors():
        rows = _open_memory(settings).list_cases(args.server, args.tenant, args.k)
    return _print_cases(args, settings, rows)


def _memory_search(args: argparse.Namespace, settings: Settings) -> int:
    if not args.text.strip():  # an empty query would rank every case alike: the whole memory, unordered
        raise UsageError("memory search needs an error text to compare with, e.g. "
                         "logagent memory search 'KeyError price'")
    if _missing(settings):
        return 0
    with _store_errors():
        rows = _open_memory(settings).search(args.server, args.tenant, args.text, args.k)
    return _print_cases(args, settings, rows)


def _full_id(memory: MemoryStore, given: str, server: str | None, tenant: str | None = None) -> str:
    """`given`, or the one case id (of `tenant`, when given) it is the start of (8 characters or more: Slack
    shows the first 8)."""
    if len(given) >= 36 or not _ID_START.fullmatch(given):
        return given
    ids = memory.ids_starting(given, server=server, tenant=tenant)
    if len(ids) > 1:
        raise UsageError(f"{given!r} starts more than one analysis id ({', '.join(sorted(ids))}): give more of it")
    return ids.pop() if ids else given


def _not_found(settings: Settings, analysis_id: str, server: str | None = None, tenant: str | None = None) -> int:
    """One line naming where the id was looked for (and how an id is given, when it is no whole one)."""
    scope = "".join(f" {name} {value!r}" for name, value in (("server", server), ("tenant", tenant)) if value)
    hint = "" if _UUID.fullmatch(analysis_id) else " (give the id, or its first 8 characters or more)"
    print(f"logagent: no analysis {analysis_id!r}{' of' + scope if scope else ''} in the memory at "
          f"{settings.memory.uri}{hint}", file=sys.stderr)
    return _NOT_FOUND


def _against(repo: Path | None, commit: str | None) -> tuple[str | None, Any]:
    """The commit and the line-change check `show` compares cited lines with (none without --repo)."""
    if repo is None:
        if commit is not None:
            raise UsageError("--commit needs --repo")
        return None, None
    from functools import partial

    from analysis.code.repo import RepoError, open_local, resolve_revision
    from analysis.code.validate import citation_changed

    try:
        checkout = open_local(repo)
    except RepoError as exc:
        raise UsageError(str(exc)) from exc
    sha = resolve_revision(checkout.repo_dir, commit) if commit else checkout.commit
    if sha is None:
        raise UsageError(f"commit {commit!r} not found in {repo}")
    return sha, partial(citation_changed, checkout.repo_dir)


def _check_has_commit(repo: Path | None, commit: str | None) -> None:
    """--repo must hold the case's commit, or every citation would only be "unverifiable": most likely
    another service's repository, or a clone that has not fetched that commit yet."""
    if repo is None or not commit:
        return
    from analysis.code.repo import resolve_revision

    if resolve_revision(repo, commit) is None:
        raise UsageError(f"{repo} does not have the case's commit {commit[:12]}: is it this service's repository, "
                         "and fetched?")


def _memory_show(args: argparse.Namespace, settings: Settings) -> int:
    commit, is_changed = _against(args.repo, args.commit)
    if _missing(settings):
        return _NOT_FOUND
    with _store_errors():
        memory = _open_memory(settings)
        detail = memory.show(_full_id(memory, args.analysis_id, args.server), time.time(), server=args.server,
                             commit=commit, is_changed=is_changed)
    if detail is None:
        return _not_found(settings, args.analysis_id, args.server)
    _check_has_commit(args.repo, detail.summary.commit)
    if readable(args):
        from consumer.cli.render import print_case

        print_case(terminal(), detail)
    else:
        _json_lines([detail])
    return 0


def _memory_forget(args: argparse.Namespace, settings: Settings) -> int:
    if _missing(settings):  # its line says why no case is found: one line, as for every miss
        return _NOT_FOUND
    with _store_errors():
        memory = _open_memory(settings)
        args.analysis_id = _full_id(memory, args.analysis_id, args.server)
        deleted = memory.forget(args.analysis_id, server=args.server)
    if not deleted:
        return _not_found(settings, args.analysis_id, args.server)
    _result(args, {"analysis_id": args.analysis_id, "forgotten": deleted},
            f"forgot {args.analysis_id} and its verdicts")
    return 0


def _result(args: argparse.Namespace, data: dict[str, Any], text: str) -> None:
    if readable(args):
        from rich.text import Text

        terminal().print(Text(text))
    else:
        _json_lines([data])


def _feedback(args: argparse.Namespace, settings: Settings) -> int:
    from analysis.intake.redact import Redactor

    args.note = Redactor(settings.redaction).redact(args.note or "")  # stored, shown and sent: secrets go first
    if args.via_kafka:
        if not _UUID.fullmatch(args.analysis_id):  # the service cannot say the id is unknown: refused here
            raise UsageError(f"--via-kafka needs a whole analysis id (a UUID, as `memory list` shows it), "
                             f"not {args.analysis_id!r}")
        return _publish_feedback(args, settings)
    if _missing(settings):
        return _NOT_FOUND
    with _store_errors():
        memory = _open_memory(settings)
        args.analysis_id = _full_id(memory, args.analysis_id, args.server, args.tenant)
        if not memory.feedback(args.server, args.analysis_id, args.verdict, args.note, tenant=args.tenant):
            return _not_found(settings, args.analysis_id, args.server, args.tenant)
        detail = memory.show(args.analysis_id, time.time(), server=args.server)
    text = f"recorded '{args.verdict}' on {args.analysis_id}"
    if detail is None:
        text += ": the case was forgotten (LOGAGENT_MEMORY__FORGET_ON_WRONG is set)"
    elif detail.verdicts:
        last = detail.verdicts[-1]
        text += (f" ({detail.summary.server} / {detail.summary.tenant}): trust {last.trust_before:.2f} → "
                 f"{last.trust_after:.2f}; the analyses that recall it now carry the verdict")
    _result(args, {"analysis_id": args.analysis_id, "verdict": args.verdict, "applied": True}, text)
    return 0


def _publish_feedback(args: argparse.Namespace, settings: Settings) -> int:
    import asyncio

    from aiokafka.errors import KafkaError

    from consumer.feedback import Feedback, publish_feedback

    feedback = Feedback(args.analysis_id, args.verdict, args.note, args.server, tenant=args.tenant)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # its connection errors: the one line below says it
    try:
        asyncio.run(asyncio.wait_for(publish_feedback(settings, feedback), timeout=60))
    except (KafkaError, TimeoutError) as exc:
        raise UsageError(f"cannot publish to {settings.kafka.feedback_topic}: {type(exc).__name__}") from exc
    topic = settings.kafka.feedback_topic
    _result(args, {"analysis_id": args.analysis_id, "verdict": args.verdict, "published": topic},
            f"published '{args.verdict}' on {args.analysis_id} to {topic}; the running service applies it")
    return 0
