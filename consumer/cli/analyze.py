"""`logagent analyze`: the command's arguments; the work is in `consumer.cli.analyze_one`, imported when
the command runs, so other commands (`logagent fingerprint` reads its first line within half a second) do
not load the localiser, git and the agent's tools."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from consumer.cli.common import add_command, add_output_flags
from consumer.settings import Settings

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add `analyze` to the subcommands."""
    analyze = add_command(
        commands, "analyze", summary="analyse one event against a local repository",
        description="Analyses one error event (any of the four input shapes, or a JSON line the service "
                    "would read) against a git repository on this machine, as the service would: the "
                    "heuristic localiser, then the LLM at LOGAGENT_OLLAMA_URL when it is set. The memory is "
                    "neither read nor written. On a terminal the analysis is printed readably; --json (or a "
                    "pipe) gives the analysis event's data as one JSON line. When the analysed commit is not "
                    "the one the event was logged at, the trace's line numbers are mapped through the diff "
                    "between the two, and a culprit line that cannot be mapped is marked unverified.",
        examples=["logagent analyze --repo ~/src/checkout --event error.json",
                  "kubectl logs deploy/checkout | grep ERROR | tail -1 | logagent analyze --repo . --offline",
                  "logagent analyze --repo . --commit HEAD --event error.json --json | jq .culprit"])
    analyze.add_argument("--repo", required=True, type=Path, help="path of the service's git repository")
    analyze.add_argument("--commit", help="commit to analyse at (default: the event's, else the work tree)")
    analyze.add_argument("--server", help="the server id (default: the event's, else the repository's name)")
    analyze.add_argument("--event", default="-", help="file holding one event, or - for stdin (default)")
    analyze.add_argument("--offline", action="store_true",
                         help="heuristic localiser only; without it the LLM at LOGAGENT_OLLAMA_URL is used "
                              "when set (the heuristic answer, with a note, when it cannot be reached)")
    add_output_flags(analyze)
    analyze.set_defaults(handler=_analyze)


def _analyze(args: argparse.Namespace, settings: Settings) -> int:
    from consumer.cli.analyze_one import run

    return run(args, settings)
