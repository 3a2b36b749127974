"""This process's memory as Linux reports it, for the benchmarks that weigh memory against a peer measured
in the same run: resident now, the peak so far, and freed heap handed back before a reading."""

from __future__ import annotations

import ctypes
import gc
from pathlib import Path

__all__ = ["peak_rss_bytes", "rss_bytes", "trim"]


def _status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status (not Linux?)")


def rss_bytes() -> int:
    """The resident set size of this process (VmRSS)."""
    return _status_bytes("VmRSS")


def peak_rss_bytes() -> int:
    """The largest resident set size this process has had (VmHWM)."""
    return _status_bytes("VmHWM")


def trim() -> None:
    """Collect garbage and hand the freed C heap back (malloc_trim): freed small strings stay in the heap
    until trimmed, so a reading after it shows what is really still held."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
