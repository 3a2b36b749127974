"""`logagent fingerprint` as a user runs it: how soon it answers its first line, and its rate as a process.

Start-up: the command is started with one event waiting on its stdin; measured is the wall time from
the start of the process to its first output line, its peak RSS then, and the CPU time of the whole
process (one line costs nothing next to start-up), against `python -c pass` on the same interpreter
(the least any Python command costs), in turns with a third contender: the command's first run on a
machine, with an empty cache directory, which compiles the redaction prefilter (~0.5 s of CPU, in a thread
of its own while the first lines are read) that every later start reads back (`analysis.intake.redact`).
Target: the first line within 0.5 s of start, judged on the median of both the usual start (the cache
kept) and the first run.

Rate: the same command reading the real-trace stream from a file, events per CPU second of the process.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench import realtraces
from bench.timing import child_cpu_seconds, kilo

FIRST_LINE_TARGET_S = 0.5


@dataclass(frozen=True, slots=True)
class ProcessRun:
    """One run of a command: wall seconds to its first output line, CPU seconds, peak RSS in bytes."""

    first_line_s: float
    cpu_s: float
    max_rss: int


def logagent() -> str:
    """The `logagent` entry point of this environment."""
    return str(Path(sys.executable).parent / "logagent")


def run_once(argv: list[str], stdin: bytes, env: dict[str, str] | None = None) -> ProcessRun:
    """Start `argv` (with `env` added to this environment), hand it `stdin`, time its first output line (its
    exit when it prints none).

    Peak RSS is read from /proc while the process waits for more input (0 for one that printed
    nothing): a child's `ru_maxrss` would count the memory of this process it was forked from.
    """
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})})
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(stdin)
    proc.stdin.flush()
    answered = proc.stdout.readline()
    first = time.perf_counter() - started
    max_rss = _peak_rss(proc.pid) if answered else 0
    proc.stdin.close()
    proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # so Popen does not wait for it again
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}")
    return ProcessRun(first, child_cpu_seconds(usage), max_rss)


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def start_up(repetitions: int, line: bytes) -> tuple[list[ProcessRun], list[ProcessRun], list[ProcessRun]]:
    """`logagent fingerprint -` with one line, the same with an empty cache directory (the first run on a
    machine: the redaction prefilter is compiled, not read back), and `python -c pass`, `repetitions` times
    each in turns."""
    ours: list[ProcessRun] = []
    cold: list[ProcessRun] = []
    bare: list[ProcessRun] = []
    for turn in range(repetitions):
        # Under HOME: the cache is never used under /tmp, which everyone may write (`analysis.intake.disk_cache`).
        with tempfile.TemporaryDirectory(dir=Path.home(), prefix=".logagent-bench-") as empty:
            contenders = [(ours, [logagent(), "fingerprint", "-"], line, None),
                          (cold, [logagent(), "fingerprint", "-"], line, {"XDG_CACHE_HOME": empty}),
                          (bare, [sys.executable, "-c", "pass"], b"", None)]
            for runs, argv, stdin, env in contenders[turn % 3:] + contenders[:turn % 3]:
                runs.append(run_once(argv, stdin, env))
    return ours, cold, bare


def process_rate(lines: list[bytes]) -> float:
    """Events per CPU second of `logagent fingerprint FILE` over `lines` (start-up included)."""
    with tempfile.NamedTemporaryFile("wb", suffix=".jsonl") as handle:
        handle.write(b"\n".join(lines) + b"\n")
        handle.flush()
        proc = subprocess.Popen([logagent(), "fingerprint", handle.name], stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"logagent fingerprint exited {proc.returncode}")
    return len(lines) / child_cpu_seconds(usage)


def _summary(runs: list[ProcessRun]) -> str:
    first = [run.first_line_s for run in runs]
    cpu = [run.cpu_s for run in runs]
    peak = max(run.max_rss for run in runs)
    return (f"{min(first):.2f} s (median {statistics.median(first):.2f}), CPU {min(cpu):.2f} s (median "
            f"{statistics.median(cpu):.2f})" + (f", peak RSS {peak / 2**20:.0f} MB" if peak else ""))


def bench(quick: bool) -> str:
    """Quick: 5 start-ups each and a 10k-event file; full: 11 and 100k."""
    stream = realtraces.build(10_000 if quick else 100_000)
    lines = [event.line for event in stream.events]
    ours, cold, bare = start_up(5 if quick else 11, lines[0] + b"\n")
    slowest = max(statistics.median(run.first_line_s for run in runs) for runs in (ours, cold))
    verdict = "met" if slowest <= FIRST_LINE_TARGET_S else "NOT met"
    rate = process_rate(lines)
    return (f"startup: logagent fingerprint first line after {_summary(ours)}; the first run on a machine (an "
            f"empty cache directory) {_summary(cold)}; python -c pass exits after "
            f"{_summary(bare)} [target first line <= {FIRST_LINE_TARGET_S} s, both medians: {verdict}]; as a "
            f"process on {stream.describe()}: {kilo(rate)} events per CPU second")
