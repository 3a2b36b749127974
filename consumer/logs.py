"""The service's logs: JSON lines on stdout, one canonical line per unit of work, fields never raw input."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TextIO

import orjson

__all__ = ["configure_logging", "log_fields"]


def log_fields(**fields: object) -> dict[str, object]:
    """`extra=` for a log call: structured fields the JSON formatter puts on the line."""
    return {"fields": fields}


class _JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the call's structured fields, every
    value passed through `redact` (logs leave the process too)."""

    def __init__(self, redact: Callable[[object], object]) -> None:
        super().__init__()
        self._redact = redact

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        line.update(getattr(record, "fields", {}))
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(self._redact(line), default=str).decode()


def configure_logging(level: str, redact: Callable[[object], object] = lambda line: line,
                      stream: TextIO | None = None) -> None:
    """Send JSON lines to `stream` (stdout) at `level`, each value through `redact` (called once, by the
    entry point)."""
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(_JsonFormatter(redact))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
