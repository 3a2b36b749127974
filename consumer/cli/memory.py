"""`logagent memory list|search|forget` and `logagent feedback`: reading and correcting the error memory."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import orjson

from consumer.cli.common import UsageError, first_line, positive_int
from consumer.settings import Settings

if TYPE_CHECKING:
    from store import CaseSummary, MemoryStore

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add `memory` and `feedback` to the subcommands."""
    memory = commands.add_parser(
        "memory", help="inspect and edit the error memory",
        description="Reads and edits the memory under LOGAGENT_DATA_DIR (or LOGAGENT_MEMORY__URI). Output is "
                    "JSON lines; an unknown analysis id exits 1, a store error exits 2.")
    memory_commands = memory.add_subparsers(dest="memory_command", required=True, metavar="ACTION")
    listing = memory_commands.add_parser("list", help="list stored analyses of a server, newest first")
    listing.add_argument("--server", required=True, help="server id")
    listing.add_argument("--tenant", help="only this tenant")
    listing.add_argument("--limit", type=positive_int, default=50, help="most rows to print (default 50)")
    listing.set_defaults(handler=_memory_list)
    search = memory_commands.add_parser("search", help="find stored analyses similar to a text")
    search.add_argument("text", help="error text to compare with")
    search.add_argument("--server", required=True, help="server id")
    search.add_argument("--tenant", help="only this tenant")
    search.add_argument("-k", type=positive_int, default=10, help="most rows to print (default 10)")
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
        raise UsageError(f"memory error: {first_line(exc)}") from exc


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
