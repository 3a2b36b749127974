"""Small statistics helpers shared by the benchmarks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Latency:
    """Percentiles of a set of durations, in seconds."""

    count: int
    p50: float
    p99: float

    @property
    def p50_ms(self) -> float:
        """The median in milliseconds."""
        return self.p50 * 1000

    @property
    def p99_ms(self) -> float:
        """The 99th percentile in milliseconds."""
        return self.p99 * 1000


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0..100) by nearest rank; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def latency(durations: Sequence[float]) -> Latency:
    """p50 and p99 of `durations`."""
    return Latency(len(durations), percentile(durations, 50), percentile(durations, 99))


def ratio(ours: float, theirs: float) -> float:
    """ours / theirs, guarding a zero denominator."""
    return ours / theirs if theirs > 0 else float("inf")
