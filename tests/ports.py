"""Loopback ports for the servers the tests start, chosen below the kernel's ephemeral range.

A port the kernel picked (`bind(("127.0.0.1", 0))`, then closed) can be picked again before the server binds
it: by another worker's bind, or as the source port of any outgoing connection (a Kafka client's, a probe's).
With three pytest-xdist workers on two cores that happened: a replica's HTTP port was taken in between. Below
the range the kernel picks nothing, and each worker takes ports from a span of its own, in turn, so a port
found free here stays free until the test that asked for it binds it.
"""

from __future__ import annotations

import itertools
import os
import socket
from pathlib import Path

_FIRST = 10_000
_SPAN = 1_000


def _first_ephemeral() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def _worker() -> int:
    number = os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:]
    return int(number) if number.isdigit() else 0


_START = _FIRST + _worker() * _SPAN
_turn = itertools.count()


def free_port() -> int:
    """A loopback TCP port nobody listens on, which neither the kernel nor another worker will hand out."""
    limit = _first_ephemeral()
    for _ in range(_SPAN):
        port = _START + next(_turn) % _SPAN
        if port >= limit:
            break
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port in {_START}-{min(_START + _SPAN, limit) - 1} for this worker "
                       f"(the kernel's ephemeral ports start at {limit}): run fewer workers")
