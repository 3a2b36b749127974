"""What every subcommand shares: the user-error exception, help with examples, output modes, input files,
decoder limits."""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

from analysis.intake.decode import DecodeConfig
from consumer.settings import Settings

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "UsageError", "add_command", "add_output_flags", "decode_config", "first_line", "one_line", "open_binary",
    "positive_int", "positive_seconds", "readable", "say", "terminal",
]  # fmt: skip


_HELP_WIDTH = 100


class UsageError(Exception):
    """A mistake the user can fix; printed as one line, exit code 2."""


def add_command(commands: Any, name: str, *, summary: str, description: str, examples: Sequence[str],
                epilog: str = "") -> argparse.ArgumentParser:
    """A subcommand whose `--help` has a description and examples (every command has both); `epilog`
    goes before the examples, as it is written."""
    listed = "examples:\n" + "\n".join(f"  {example}" for example in examples)
    parser: argparse.ArgumentParser = commands.add_parser(
        name, help=summary, description=textwrap.fill(description, _HELP_WIDTH),
        epilog=f"{epilog}\n\n{listed}" if epilog else listed, formatter_class=argparse.RawDescriptionHelpFormatter)
    return parser


def add_output_flags(parser: argparse.ArgumentParser) -> None:
    """`--json` / `--text`: without either, a terminal gets the readable form and a pipe gets JSON."""
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--json", dest="output", action="store_const", const="json",
                      help="print JSON (the default when stdout is not a terminal)")
    mode.add_argument("--text", dest="output", action="store_const", const="text",
                      help="print the readable form even into a pipe (without colour)")


def readable(args: argparse.Namespace, stream: TextIO | None = None) -> bool:
    """Whether to print the readable form: `--text`, or a terminal without `--json`."""
    output = getattr(args, "output", None)
    if output is not None:
        return bool(output == "text")
    return (stream or sys.stdout).isatty()


_PIPED_WIDTH = 10_000  # wide enough that nothing wraps; rich pads no line to it


def terminal(stream: TextIO | None = None) -> Console:
    """A rich console on `stream` (stdout): colour only when it is a terminal, and never under NO_COLOR
    (rich reads it); lines wrap at the terminal's width, and not at all when piped (a path stays whole for
    `grep`)."""
    from rich.console import Console  # rich loads only for the commands that print readably

    out = stream or sys.stdout
    tty = out.isatty()
    return Console(file=out, force_terminal=tty, highlight=False, soft_wrap=False, width=None if tty else _PIPED_WIDTH)


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def one_line(text: str) -> str:
    """`text` with control characters (terminal escapes, line breaks, bidi overrides) shown, not obeyed: an
    error can quote a value from the environment or the command line."""
    return _UNPRINTABLE.sub(lambda found: found.group().encode("unicode_escape").decode(), text)


def say(message: str) -> None:
    """A one-line remark on stderr (an empty result, an error); stdout stays data only."""
    print(f"logagent: {one_line(message)}", file=sys.stderr)


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1 (argparse would name the function in its error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0 (a timeout of 0 or less would end before it began)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:  # NaN too
        raise argparse.ArgumentTypeError("must be more than 0 seconds")
    return value


@contextmanager
def open_binary(name: str) -> Iterator[BinaryIO]:
    """`name` opened for reading bytes, or stdin for `-`; an unreadable file is a `UsageError`."""
    if name == "-":
        yield sys.stdin.buffer
        return
    if not name.strip():
        raise UsageError("the file name is empty: name a file, or - for stdin")
    try:
        handle = Path(name).open("rb")  # noqa: SIM115 - closed by the context manager below
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc.strerror or exc}") from exc
    with handle:
        yield handle


def decode_config(settings: Settings, default_server_id: str = "") -> DecodeConfig:
    """The decoder limits and field choices from the settings."""
    limits = settings.input
    return DecodeConfig(max_message_bytes=limits.max_message_bytes, max_depth=limits.max_depth,
                        commit_field=limits.commit_field, server_id_fields=tuple(limits.server_id_fields),
                        default_server_id=default_server_id, tenant=limits.tenant)


def first_line(error: BaseException) -> str:
    """The first line of an error's text, bounded, for a one-line message."""
    lines = str(error).strip().splitlines()
    return lines[0][:300] if lines else type(error).__name__
