"""What every subcommand shares: the user-error exception, input files, decoder limits."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from analysis.intake.decode import DecodeConfig
from consumer.settings import Settings

__all__ = ["UsageError", "decode_config", "first_line", "open_binary", "positive_int"]


class UsageError(Exception):
    """A mistake the user can fix; printed as one line, exit code 2."""


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


@contextmanager
def open_binary(name: str) -> Iterator[BinaryIO]:
    """`name` opened for reading bytes, or stdin for `-`; an unreadable file is a `UsageError`."""
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


def first_line(error: BaseException) -> str:
    """The first line of an error's text, bounded, for a one-line message."""
    lines = str(error).strip().splitlines()
    return lines[0][:300] if lines else type(error).__name__
