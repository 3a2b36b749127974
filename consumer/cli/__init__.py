"""`logagent`: the one entry point. Settings are built once here and passed down.

Each subcommand lives in a module of this package that adds its parser with `register`. User errors (bad
input, missing repository, invalid settings) end with a one-line message on stderr and exit code 2, never
a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from consumer.cli import analyze, config, fingerprint, notify, redact, service
from consumer.cli import memory as memory_commands
from consumer.cli.common import UsageError, one_line, say
from consumer.settings import ConfigError, Settings

__all__ = ["UsageError", "main"]

_USER_ERROR = 2

Handler = Callable[[argparse.Namespace, Settings], int]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv`, build the settings once and run the subcommand; returns the exit code."""
    args = _parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        settings = config.load_settings(os.environ)
        return handler(args, settings)
    except (UsageError, ConfigError) as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`logagent fingerprint big.jsonl | head`): stop quietly, as `cat` does;
        # stdout goes to /dev/null so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:  # a directory not writable, a path that cannot be (`--keep /proc/x`): one line
        where = f": {exc.filename}" if exc.filename is not None else ""
        return _fail(f"{exc.strerror or type(exc).__name__}{where}")


class _Version(argparse.Action):
    """`logagent --version`: the package's version and commit (those `logagent_build_info` exports)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        from consumer.metrics import build_info

        version, commit = build_info()
        print(f"logagent {version} (commit {commit})")
        parser.exit(0)


def _fail(message: str) -> int:
    say(message)
    return _USER_ERROR


class _Parser(argparse.ArgumentParser):
    """Argument errors are one line too (`logagent memory show: error: ...`, exit 2), not usage plus error;
    subcommand parsers are of the same class, as argparse makes them, so each names its own --help."""

    _relaxed: Sequence[argparse.Action] = ()  # the required ones parse_known_args relaxed: --help shows them so

    def error(self, message: str) -> NoReturn:
        self.exit(_USER_ERROR, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")

    def parse_known_args(  # type: ignore[override]  # typeshed overloads it by namespace type; this is one
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        """Unknown arguments are refused by the parser they were given to, before any missing one: argparse
        checks required arguments first (`logagent --bogus` said COMMAND was missing) and leaves unknown
        ones to the top parser (`logagent fingerprint --bogus` pointed to `logagent --help`)."""
        required = self._relaxed = [action for action in self._actions if action.required]
        try:
            _set_required(required, False)
            parsed, unknown = super().parse_known_args(args, namespace)
        finally:
            _set_required(required, True)
            self._relaxed = ()
        if unknown:
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        missing = [_action_name(action) for action in required if getattr(parsed, action.dest, None) is None]
        if missing:
            self.error(f"the following arguments are required: {', '.join(missing)}")
        return parsed, unknown

    def format_usage(self) -> str:
        return self._as_declared(super().format_usage)

    def format_help(self) -> str:
        return self._as_declared(super().format_help)

    def _as_declared(self, formatted: Callable[[], str]) -> str:
        relaxed = self._relaxed
        _set_required(relaxed, True)
        try:
            return formatted()
        finally:
            _set_required(relaxed, False)


def _set_required(actions: Sequence[argparse.Action], required: bool) -> None:
    for action in actions:
        action.required = required


def _action_name(action: argparse.Action) -> str:
    """How argparse names an argument in its errors: its flags, else its metavar, else its dest."""
    return "/".join(action.option_strings) or str(action.metavar or action.dest)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="logagent", description="Groups bursts of production errors and explains each from the source.")
    parser.add_argument("--version", action=_Version, help="print the version and the commit it was built from")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (service, fingerprint, redact, analyze, memory_commands, notify, config):
        module.register(commands)
    return parser
