"""`logagent redact`: exactly what the service lets leave of each input line, in order.

A line that decodes as an error event becomes that event as the service keeps it (decoded, normalised,
every field redacted), as one JSON object; an OpenTelemetry line with several records becomes a JSON
array of them. Other JSON comes out as JSON with every string redacted (as its escapes spell it: read
as text, `bob\u0040example.com` would pass the rules); any other line is redacted as text; each line of
a private key block pasted as text (PEM, SSH2, PuTTY) comes out as the placeholder.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable
from typing import Any

import orjson

from analysis.errors import BadInput
from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.redact import Redactor, redact_event, redact_value
from analysis.intake.redact_rules import NOTE, NOTE_LEAD
from consumer.cli.common import add_command, decode_config, open_binary
from consumer.settings import Settings

__all__ = ["redact_line", "register"]



def register(commands: Any) -> None:
    """Add `redact` to the subcommands."""
    redact = add_command(
        commands, "redact", summary="print what the service lets leave of each line (JSON events or plain text)",
        description="One output line per input line, in order. A JSON error event comes out as the redacted "
                    "event the service analyses and publishes from (an OpenTelemetry batch as a JSON array); "
                    "other JSON as JSON with every string redacted; any other line comes out redacted as text. "
                    "Decided line by line.",
        examples=["logagent redact errors.jsonl", "echo 'login failed for jane@example.com' | logagent redact"])
    redact.add_argument("file", nargs="?", default="-", help="input file, or - for stdin (default)")
    redact.set_defaults(handler=_redact)


def redact_line(line: bytes, config: DecodeConfig, redactor: Redactor,
                as_text: Callable[[str], str] | None = None) -> bytes:
    """The output line for one input line (without its line break); a line of text goes through `as_text`
    (the redactor's own, unless given)."""
    try:
        events = decode_message(line, config) if line.lstrip().startswith((b"{", b"[")) else []
    except BadInput:
        events = []
    if events:
        redacted = [redact_event(event, redactor) for event in events]
        with contextlib.suppress(TypeError):  # an OTLP intValue past 64 bits, which orjson cannot write
            return orjson.dumps(redacted[0] if len(redacted) == 1 else redacted)
    text = line.decode("utf-8", "replace")
    try:
        # JSON read as text would hide what its escapes spell (`bob\u0040example.com`) from the rules.
        doc = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past what the parser takes: as text
        return (as_text or redactor.redact)(text).encode()
    return json.dumps(redact_value(doc, redactor), ensure_ascii=False).encode("utf-8", "replace")


class _Notes:
    """loguru's `diagnose` notes a value under the source line that names it: a line of those notes (or of a
    value going on under one) is redacted with the text lines of its block before it (64 at most: the source
    line and the notes so far), as the service redacts the whole trace; a blank line ends the block."""

    _KEPT = 64

    def __init__(self, redact: Callable[[str], str]) -> None:
        self._redact, self._block, self._noting = redact, list[str](), False

    def redact(self, text: str) -> str:
        noting = NOTE.match(text) is not None or (self._noting and text != "" and text[0] in NOTE_LEAD)
        joined = self._redact("\n".join([*self._block, text])).split("\n") if noting and self._block else []
        out = joined[-1] if len(joined) == len(self._block) + 1 else self._redact(text)
        self._noting = noting
        self._block = [*self._block[1 - self._KEPT:], text] if text.strip() else []
        return out


def _redact(args: argparse.Namespace, settings: Settings) -> int:
    config = decode_config(settings)
    redactor = Redactor(settings.redaction)
    out = sys.stdout.buffer
    # A private key pasted as text spans lines: the first one is redacted here, the rest of the block there.
    keys = redactor.key_block_lines()
    notes = _Notes(redactor.redact)
    with open_binary(args.file) as lines:
        for raw in lines:
            line = raw.rstrip(b"\r\n")
            hidden = keys.redact(line.decode("utf-8", "replace")) if keys is not None else None
            out.write((hidden.encode() if hidden is not None else redact_line(line, config, redactor, notes.redact))
                      + b"\n")
            out.flush()  # a user piping a live stream sees each line as it arrives
    return 0
