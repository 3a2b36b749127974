"""Run the `logagent` command as a user does: a real process, its stdout a pipe or a real terminal (a pty)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from pathlib import Path

from tests.paths import PROJECT_ROOT

COLOUR = re.compile(r"\x1b\[[0-9;]*?(?:3[0-9]|9[0-7]|38;5;\d+|38;2;[\d;]+)[0-9;]*m")
"""An SGR escape that sets a foreground colour (bold or underline alone are not colour)."""
_COLUMNS = 120


@dataclass(frozen=True, slots=True)
class Run:
    """A finished command: exit code, stdout (with `\\r\\n` made `\\n` on a terminal) and stderr."""

    returncode: int
    stdout: str
    stderr: str


def logagent_argv() -> list[str]:
    """The installed console script when there is one, else the same module."""
    script = Path(sys.executable).parent / "logagent"
    return [str(script)] if script.exists() else [sys.executable, "-m", "consumer.cli"]


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without LOGAGENT_* (nor NO_COLOR, nor COLUMNS and LINES, which would override the
    pty's size: pytest-xdist's workers have COLUMNS=80), plus `extra`."""
    kept = {k: v for k, v in os.environ.items()
            if not k.startswith("LOGAGENT_") and k not in ("NO_COLOR", "COLUMNS", "LINES")}
    return {**kept, "TERM": "xterm-256color", **extra}


def run(*args: str, env: dict[str, str], stdin: bytes = b"", timeout_s: float = 120) -> Run:
    """`logagent ARGS` with stdout a pipe."""
    proc = subprocess.run([*logagent_argv(), *args], input=stdin, capture_output=True, cwd=PROJECT_ROOT,
                          env=env, timeout=timeout_s, check=False)
    return Run(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def run_on_terminal(*args: str, env: dict[str, str], timeout_s: float = 120) -> Run:
    """`logagent ARGS` with stdout a pseudo-terminal of 120 columns (stdin empty, stderr a pipe)."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 50, _COLUMNS, 0, 0))
    proc = subprocess.Popen([*logagent_argv(), *args], stdin=subprocess.DEVNULL, stdout=terminal,
                            stderr=subprocess.PIPE, cwd=PROJECT_ROOT, env=env)
    os.close(terminal)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if not select.select([controller], [], [], 0.5)[0]:
                continue
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the process closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        _, stderr = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(controller)
        if proc.poll() is None:
            proc.kill()
    return Run(proc.returncode, b"".join(chunks).decode().replace("\r\n", "\n"), stderr.decode())
