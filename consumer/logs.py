"""The service's logs: JSON lines on stdout in Elastic Common Schema field names, one line per unit of work
or change of state, fields never raw input, and what could come from input redacted.

`@timestamp`, `log.level`, `log.logger`, `message`, `service.*` and `event.*` are ECS fields, so the lines
fit the log pipelines users already run (Filebeat, Elastic Agent, Fluent Bit, Vector, Loki); the call's
own fields sit under the custom `logagent` namespace, where they cannot clash with an ECS field.

The Kafka client's own lines repeat while a broker is down (a trial counted ~150 a second): each of its
messages goes out once per `REPEAT_WINDOW_S`, the next one saying how many like it were left out.
"""

from __future__ import annotations

import logging
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TextIO

import orjson

__all__ = ["configure_logging", "log_event", "log_fields", "log_settings"]

_ECS_VERSION = "8.11.0"
_SERVICE = "logagent"


def log_fields(**fields: object) -> dict[str, object]:
    """`extra=` for a log call: structured fields the JSON formatter puts under `logagent`."""
    return {"fields": fields}


def log_event(action: str, **fields: object) -> dict[str, object]:
    """`extra=` for a line that records a change of state: `event.action` names it (ECS), plus fields."""
    return {"fields": fields, "event_action": action}


def log_settings(action: str, **fields: object) -> dict[str, object]:
    """`extra=` like `log_event` for fields taken from the settings, never from input: they are not
    redacted (the broker's IP address is what an operator needs to see); the caller masks URL passwords."""
    return {"fields": fields, "event_action": action, "from_settings": True}


class _EcsFormatter(logging.Formatter):
    """One ECS JSON object per line; the message, the fields and error texts pass through `redact` (logs
    leave the process too), the envelope the formatter writes itself does not need to."""

    def __init__(self, redact: Callable[[object], object], service: Mapping[str, str]) -> None:
        super().__init__()
        self._redact = redact
        self._service = {f"service.{key}": value for key, value in service.items() if value}

    def format(self, record: logging.LogRecord) -> str:
        try:
            return self._line(record)
        except Exception as error:  # never logging's own report, which prints the record's message unredacted
            return orjson.dumps(self._envelope(record, f"a log line could not be written: {type(error).__name__}"),
                                default=str).decode()

    def _envelope(self, record: logging.LogRecord, message: object) -> dict[str, object]:
        stamp = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        return {"@timestamp": stamp.replace("+00:00", "Z"), "log.level": record.levelname.lower(),
                "log.logger": record.name, "message": message, "service.name": _SERVICE, **self._service,
                "ecs.version": _ECS_VERSION}

    def _line(self, record: logging.LogRecord) -> str:
        line = self._envelope(record, self._redact(record.getMessage()))
        action = getattr(record, "event_action", None)
        if action:
            line.update({"event.action": action, "event.kind": "event", "event.dataset": f"{_SERVICE}.service"})
        fields = getattr(record, "fields", None)
        if fields:
            line[_SERVICE] = fields if getattr(record, "from_settings", False) else self._redact(fields)
        if record.exc_info and record.exc_info[0] is not None:
            kind, error, tb = record.exc_info
            line.update({"error.type": kind.__name__, "error.message": self._redact(str(error)),
                         "error.stack_trace": self._redact("".join(traceback.format_exception(kind, error, tb)))})
        return orjson.dumps(line, default=str).decode()


REPEAT_WINDOW_S = 10.0
_REPEATED = ("aiokafka",)  # the loggers whose lines are thinned
_MAX_KEYS = 1024


class _Repeats(logging.Filter):
    """Lets one line of each (logger, level, message) of `_REPEATED` through per `REPEAT_WINDOW_S`; the next
    one through names how many were left out meanwhile. The keys are the messages' templates (a bounded set)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._clock = clock
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(_REPEATED):
            return True
        key, now = (record.name, record.levelno, str(record.msg)), self._clock()
        since, left_out = self._seen.get(key, (-REPEAT_WINDOW_S, 0))
        if now - since < REPEAT_WINDOW_S:
            self._seen[key] = (since, left_out + 1)
            return False
        if len(self._seen) >= _MAX_KEYS:  # messages formatted before logging would each be a key of their own
            self._seen.clear()
        self._seen[key] = (now, 0)
        if left_out:
            record.msg = f"{record.msg} ({left_out} more like it in {REPEAT_WINDOW_S:.0f} s left out)"
        return True


def configure_logging(level: str, redact: Callable[[object], object] = lambda value: value,
                      stream: TextIO | None = None, service: Mapping[str, str] | None = None) -> None:
    """Send ECS JSON lines to `stream` (stdout) at `level`, input-derived values through `redact` (called
    once, by the entry point). `service` adds ECS `service.*` fields, e.g. {"version": "0.1.0"}."""
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(_EcsFormatter(redact, service or {}))
    handler.addFilter(_Repeats())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # httpx logs each request's URL at INFO, and a webhook's or a tracker's path is its secret (`/hooks/T0/B9/<token>`).
    logging.getLogger("httpx").setLevel(logging.WARNING)
