"""`logagent fingerprint`: the signature of each event, JSON lines in, JSON lines out, in order."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import orjson

from analysis.errors import BadInput
from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.redact import Redactor, redact_key_fields
from analysis.intake.signature import describe, fingerprint_event
from consumer.cli.common import add_command, decode_config, open_binary
from consumer.settings import Settings

__all__ = ["fingerprint_line", "register"]


def register(commands: Any) -> None:
    """Add `fingerprint` to the subcommands."""
    fingerprint = add_command(
        commands, "fingerprint", summary="print the signature of each event (JSON lines in, JSON lines out)",
        description="One output line per input line, in order: the signature (fingerprint, basis, exception "
                    "type, normalised frames), or {\"error\": reason} for a line that is not a valid event. For "
                    "an OpenTelemetry line carrying several records, the first record's signature is printed "
                    "with \"records\": N. Events with the same fingerprint land in the same burst.",
        examples=["logagent fingerprint errors.jsonl", "kafkacat -C -t errors -e | logagent fingerprint | "
                  "jq -r .fingerprint | sort | uniq -c | sort -rn"])
    fingerprint.add_argument("file", nargs="?", default="-", help="JSON lines file, or - for stdin (default)")
    fingerprint.set_defaults(handler=_fingerprint)


def fingerprint_line(line: bytes, config: DecodeConfig, in_app_prefixes: Sequence[str],
                     redactor: Redactor) -> dict[str, object]:
    """The output object for one input line: the first record's signature as the service makes it (of the
    event redacted: a message signature reads the redacted message), or `{"error": reason}`."""
    if not line.strip():
        return {"error": "empty_line"}
    try:
        events = decode_message(line, config)
    except BadInput as bad:
        return {"error": bad.reason}
    if not events:
        return {"error": "no_records"}
    out = describe(fingerprint_event(redact_key_fields(events[0], redactor), in_app_prefixes))
    # Each field was redacted alone; a printed frame joins two (`module.function`), which together may spell one.
    out["frames"] = [redactor.redact(frame) for frame in out["frames"]]
    if len(events) > 1:
        out["records"] = len(events)
    return out


def _fingerprint(args: argparse.Namespace, settings: Settings) -> int:
    config = decode_config(settings)
    prefixes = settings.input.in_app_prefixes
    redactor = Redactor(settings.redaction)
    out = sys.stdout.buffer
    with open_binary(args.file) as lines:
        for raw in lines:
            result = fingerprint_line(raw.rstrip(b"\r\n"), config, prefixes, redactor)
            out.write(orjson.dumps(result) + b"\n")
            out.flush()  # a user piping a live stream sees each answer as its line arrives
    return 0
