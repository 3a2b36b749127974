"""`logagent run` (the service) and `logagent demo` (the whole flow on an embedded broker)."""

from __future__ import annotations

import argparse
import inspect
import re
import textwrap
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from consumer.cli.common import UsageError, add_command, positive_int, positive_seconds
from consumer.settings import Settings

__all__ = ["register", "setting_groups"]

_ASIDE = re.compile(r"(?<!\s)\s*\([^()]*\)")  # from the first space only, and no nested "(": linear


def setting_groups() -> list[tuple[str, str]]:
    """(environment variable pattern, what it sets) for each settings group, then the top-level ones."""
    groups: list[tuple[str, str]] = []
    top: list[str] = []
    for name, field in Settings.model_fields.items():
        kind = field.annotation
        if inspect.isclass(kind) and issubclass(kind, BaseModel):
            doc = (inspect.getdoc(kind) or "").split("\n\n", 1)[0].replace("\n", " ")
            groups.append((f"LOGAGENT_{name.upper()}__*", _ASIDE.sub("", doc)))
        else:
            top.append(f"LOGAGENT_{name.upper()}")
    return [*groups, (", ".join(top), "top-level settings")]


def _settings_help() -> str:
    *groups, (top, _) = setting_groups()
    width = max(len(pattern) for pattern, _ in groups)
    lines = ["settings: LOGAGENT_* environment variables, nested groups joined by '__', lists and maps as JSON;",
             "`logagent config` prints the effective settings and where each came from.",
             *(f"  {pattern:<{width}}  {doc}" for pattern, doc in groups),
             *textwrap.wrap(f"and {top}", 98, initial_indent="  ", subsequent_indent="  ")]
    return "\n".join(lines)


def register(commands: Any) -> None:
    """Add `run` and `demo` to the subcommands."""
    run = add_command(
        commands, "run", summary="run the service (Kafka in, analysis events out)", epilog=_settings_help(),
        examples=["LOGAGENT_KAFKA__BOOTSTRAP_SERVERS=kafka-1:9093 LOGAGENT_OLLAMA_URL=http://ollama:11434 "
                  "logagent run", "logagent config    # check the settings first"],
        description="The service: reads error logs from the input topic, groups each burst of one failure, "
                    "analyses it once from the deployed source (with the LLM when Ollama is configured), "
                    "publishes the analysis event and commits the offsets. Bad input goes to the DLQ. Stops "
                    "cleanly on SIGTERM; /metrics, /livez and /readyz are served on LOGAGENT_HTTP__PORT.")
    run.set_defaults(handler=_run)

    demo = add_command(
        commands, "demo", summary="the whole flow on an embedded broker and sample repositories",
        description="Starts the Kafka-compatible tansu broker on a free loopback port, builds three sample "
                    "services as git repositories with real bugs, produces their error stream in the four "
                    "input shapes, runs the service until the stream is drained and prints what came out. "
                    "Everything it started is stopped at the end, on Ctrl-C too. With LOGAGENT_OLLAMA_URL set "
                    "the LLM explains the bursts. --keep DIR leaves in DIR the sample repositories and their "
                    "checkouts, one event file per bug, every well-formed message produced (events.jsonl, one "
                    "per line) and the memory, for `logagent analyze`, `logagent memory` and `logagent run` "
                    "to read.",
        examples=["logagent demo", "logagent demo --events 500 --keep ./demo-run",
                  "LOGAGENT_DATA_DIR=./demo-run logagent memory servers"])
    demo.add_argument("--events", type=positive_int, default=3_000,
                      help="about how many events to produce (default 3000); each burst of the demo has 5 at least, "
                           "so a small number rounds up")
    demo.add_argument("--seed", type=int, default=7, help="seed of the generated stream (default 7)")
    demo.add_argument("--timeout", type=positive_seconds, default=120.0,
                      help="seconds to wait for every analysis (default 120)")
    demo.add_argument("--keep", type=Path, metavar="DIR",
                      help="build in DIR and keep it: sample repositories, events, memory")
    demo.set_defaults(handler=_demo)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from consumer.runner import run_service  # the service's imports are only needed by this command

    return run_service(settings)


def _demo(args: argparse.Namespace, settings: Settings) -> int:
    keep: Path | None = args.keep
    if keep is not None and (keep.is_file() or (keep.is_dir() and any(keep.iterdir()))):
        raise UsageError(f"--keep {keep}: give a new or empty directory")
    from demo.broker import BrokerError  # the demo is a package of its own; only this command loads it
    from demo.run import run_demo

    try:
        return run_demo(settings, events=args.events, seed=args.seed, timeout_s=args.timeout, keep=keep)
    except BrokerError as exc:
        raise UsageError(str(exc)) from exc
