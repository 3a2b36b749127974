"""`logagent run` (the service) and `logagent demo` (the whole flow on an embedded broker)."""

from __future__ import annotations

import argparse
from typing import Any

from consumer.cli.common import UsageError, positive_int
from consumer.settings import Settings

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add `run` and `demo` to the subcommands."""
    run = commands.add_parser("run", help="run the service (Kafka in, analysis events out)")
    run.set_defaults(handler=_run)

    demo = commands.add_parser("demo", help="the whole flow on an embedded broker and sample repositories")
    demo.add_argument("--events", type=positive_int, default=3_000, help="events to produce (default 3000)")
    demo.add_argument("--seed", type=int, default=7, help="seed of the generated stream (default 7)")
    demo.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the drain")
    demo.set_defaults(handler=_demo)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from consumer.runner import run_service  # the service's imports are only needed by this command

    return run_service(settings)


def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from demo.broker import BrokerError  # the demo is a package of its own; only this command loads it
    from demo.run import run_demo

    try:
        return run_demo(settings, events=args.events, seed=args.seed, timeout_s=args.timeout)
    except BrokerError as exc:
        raise UsageError(str(exc)) from exc
