"""`logagent notify`: the delivery service, and `--preview` to see the Slack message of an analysis."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from functools import partial
from typing import Any

import orjson

from consumer.cli.common import UsageError, add_command, open_binary
from consumer.settings import Settings

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add `notify` to the subcommands."""
    notify = add_command(
        commands, "notify", summary="deliver analyses to Slack, webhooks and issue trackers",
        examples=["LOGAGENT_NOTIFY__SLACK__ENABLED=true LOGAGENT_NOTIFY__SLACK__WEBHOOK_URL_FILE=/run/secrets/slack "
                  "logagent notify",
                  "logagent analyze --repo . --event error.json --json | logagent notify --preview"],
        description="Consumes the analyses topic (LOGAGENT_KAFKA__OUTPUT_TOPIC) in consumer groups of its own, "
                    "one per enabled sink (LOGAGENT_NOTIFY__*), and delivers each analysis its routes take. "
                    "With --preview it reads analysis events (or `logagent analyze` output) and prints the "
                    "Slack message each would get, sending nothing.")
    notify.add_argument("--preview", metavar="FILE", nargs="?", const="-",
                        help="print the Slack message of the analyses in FILE (default: stdin) and exit")
    notify.add_argument("--json", action="store_true", help="with --preview: the Block Kit JSON, not text")
    notify.set_defaults(handler=_notify)


def _documents(raw: bytes) -> Iterator[bytes]:
    """One JSON document (pretty-printed or not), or JSON lines."""
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        yield from (line for line in raw.splitlines() if line.strip())
        return
    yield raw


def _as_event(document: bytes) -> bytes:
    """An analysis event; a bare analysis (what `logagent analyze` prints) is wrapped as its `data`."""
    try:
        doc = orjson.loads(document)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"not JSON: {exc}") from exc
    if isinstance(doc, dict) and "data" not in doc and "analysis_id" in doc:
        doc = {"type": "logagent.analysis.v1", "data": doc}
    return orjson.dumps(doc)


def _preview(args: argparse.Namespace, settings: Settings) -> int:
    from analysis.intake.redact import Redactor, redact_value
    from consumer.notify.notice import BadNotice, read_event
    from consumer.notify.service import NotifyConfigError, source_links
    from consumer.notify.slack import render_text, slack_message

    try:
        links = source_links(settings)
    except NotifyConfigError as exc:
        raise UsageError(str(exc)) from exc
    with open_binary(args.preview) as source:
        raw = source.read()
    redact = partial(redact_value, redactor=Redactor(settings.redaction))  # as a delivery redacts (`SinkLane`)
    for document in _documents(raw):
        try:
            notice = read_event(_as_event(document), redact)[0]
        except BadNotice as bad:
            raise UsageError(f"not an analysis event: {bad}") from bad
        if notice is None:
            raise UsageError("not an analysis event: another event type")
        message = slack_message(notice, links)
        sys.stdout.write(orjson.dumps(message).decode() + "\n" if args.json else render_text(message))
    return 0


def _notify(args: argparse.Namespace, settings: Settings) -> int:
    if args.preview is not None:
        return _preview(args, settings)
    from consumer.notify.service import NotifyConfigError, check_settings, run_notify

    try:
        check_settings(settings)
    except NotifyConfigError as exc:
        raise UsageError(str(exc)) from exc
    return run_notify(settings)
