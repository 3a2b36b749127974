"""CPU time of contenders run in turns: the timing every throughput benchmark uses.

A shared machine slows every process now and then. Wall-clock timings of contenders run one after the
other then compare different machines: one run showed a loop that does more work than `orjson.loads`
at 1.02x its speed. So each contender is timed by the CPU time of this process (`time.process_time`,
every thread of it, nothing of other processes), contenders take turns within each repetition (the
order rotating, so none always runs on a cache the previous one warmed), and each reports the best
(min) and the median of its repetitions. A ratio between two contenders is given from their best
repetitions and as the median of the per-turn ratios, which cancels what one turn shared.
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Timing:
    """CPU seconds of each repetition of one contender, in turn order."""

    seconds: tuple[float, ...]

    @property
    def best(self) -> float:
        """The fastest repetition: the least the machine disturbed it."""
        return min(self.seconds)

    @property
    def median(self) -> float:
        """The median repetition."""
        return statistics.median(self.seconds)

    def rates(self, items: int) -> tuple[float, float]:
        """(best, median) items per CPU second."""
        return items / self.best, items / self.median

    def rate_text(self, items: int, unit: str = "events/s") -> str:
        """`55k events/s (median 52k)`: items per CPU second."""
        best, median = self.rates(items)
        return f"{kilo(best)} {unit} (median {kilo(median)})"


@dataclass(frozen=True, slots=True)
class Ratio:
    """How many times faster one contender is than another (above 1: faster)."""

    best: float
    """Rate of the best repetitions, ours over theirs."""
    median: float
    """Median over turns of the per-turn rate ratio."""
    low: float
    high: float

    def text(self) -> str:
        """`0.21x (median 0.20x)`."""
        return f"{self.best:.2f}x (median {self.median:.2f}x)"

    def spread(self) -> str:
        """`0.18-0.22x`: the lowest and highest per-turn ratio."""
        return f"{self.low:.2f}-{self.high:.2f}x"


def ratio(ours: Timing, theirs: Timing) -> Ratio:
    """Our speed over theirs on the same work (their seconds over ours), best and per turn."""
    per_turn = [t / o for o, t in zip(ours.seconds, theirs.seconds, strict=True) if o > 0]
    if not per_turn:
        return Ratio(float("inf"), float("inf"), float("inf"), float("inf"))
    return Ratio(theirs.best / ours.best, statistics.median(per_turn), min(per_turn), max(per_turn))


def kilo(rate: float) -> str:
    """A rate in thousands, as `55k` or `1.9k`."""
    return f"{rate / 1000:.0f}k" if rate >= 10_000 else f"{rate / 1000:.1f}k"


def cpu_seconds(work: Callable[[], object]) -> float:
    """CPU seconds of this process spent in `work()`, after a full collection so none is inherited."""
    gc.collect()
    started = time.process_time()
    work()
    return time.process_time() - started


def interleaved(contenders: Mapping[str, Callable[[], object]], repetitions: int) -> dict[str, Timing]:
    """Each contender `repetitions` times, all of them taking turns within each repetition."""
    names = list(contenders)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for turn in range(repetitions):
        shift = turn % len(names)
        for name in names[shift:] + names[:shift]:
            seconds[name].append(cpu_seconds(contenders[name]))
    return {name: Timing(tuple(values)) for name, values in seconds.items()}


def child_cpu_seconds(rusage: Any) -> float:
    """User + system CPU seconds of a `resource.struct_rusage` (what `os.wait4` returns for a child)."""
    return float(rusage.ru_utime + rusage.ru_stime)


def load_average() -> str:
    """The 1-minute load average, for the header of a run (other jobs on the machine)."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "?"


def median_of(values: Sequence[float]) -> float:
    """The median, 0.0 for no values."""
    return statistics.median(values) if values else 0.0
