"""The scale curve: events per CPU second and RSS as the stream grows, and as its signatures multiply.

Each point runs in a fresh process: the generated stream (`bench.workload`, 4 kB events in the four
shapes) is produced in chunks and fed through the service's per-message path (`bench.intake`: decode,
redact, fingerprint, window, at the default window settings, so at most 10k bursts are open), and the
quiet bursts close every 2,000 events as the service's expiry (every 0.1 s) closes them, their samples
built; only the feeding is timed (CPU). RSS is the growth of VmRSS over the process before the first
event, at the end (bursts still open; freed heap returned to the system first, so what generating the
stream freed does not count), and its peak (VmHWM, which includes the generator's chunks).
- events: 10k, 100k and 1M events of the usual stream (160 failures, bursts of 20-400);
- signatures: a fixed number of events spread over 1k, 10k and 100k failures, each in one burst.
"""

from __future__ import annotations

import itertools
import multiprocessing
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from bench.intake import Intake
from bench.rss import peak_rss_bytes, rss_bytes, trim
from bench.timing import kilo
from bench.workload import WorkloadEvent, WorkloadSpec, stream

_CHUNK = 10_000
_EXPIRE_EVERY = 2_000  # the service expires every 0.1 s: up to ~3.5k events at the fastest rates below
_MB = 1024 * 1024


@dataclass(frozen=True)
class Point:
    """One point of the curve."""

    label: str
    events: int
    cpu_s: float
    rss_end: int
    rss_peak: int
    signatures: int
    open_bursts: int
    closed_bursts: int

    def row(self) -> str:
        """`events 100k: 40k events/s, RSS +12 MB (peak +160 MB), 157 signatures, 480 bursts closed, 8 open`."""
        return (f"{self.label}: {kilo(self.events / self.cpu_s)} events/s, RSS +{self.rss_end / _MB:.0f} MB (peak "
                f"+{self.rss_peak / _MB:.0f} MB), {self.signatures} signatures, {self.closed_bursts} bursts closed, "
                f"{self.open_bursts} open")


def run_point(label: str, spec: WorkloadSpec) -> Point:
    """Feed `spec`'s stream through the intake in chunks; CPU of the feeding only, RSS growth."""
    events = stream(spec)
    intake = Intake(count_signatures=True, expire_every=_EXPIRE_EVERY)
    lines = [next(events).line]  # the generator's catalogue is built before the baseline
    trim()
    before = rss_bytes()
    cpu_s = 0.0
    while lines:
        started = time.process_time()
        for raw in lines:
            intake.add(raw)
        cpu_s += time.process_time() - started
        lines = _next_lines(events)
    trim()  # what generating the stream freed is not the intake's
    signatures = len(intake.signatures or ())
    return Point(label, spec.events, cpu_s, rss_bytes() - before, peak_rss_bytes() - before, signatures,
                 intake.window.open_count, intake.closed)


def _next_lines(events: Iterator[WorkloadEvent]) -> list[bytes]:
    return [event.line for event in itertools.islice(events, _CHUNK)]


def signature_spec(events: int, signatures: int) -> WorkloadSpec:
    """`events` events over `signatures` failures, each failure in one burst of about events/signatures."""
    mean = max(1, events // signatures)
    # A quarter more failures than bursts: burst sizes are drawn, so the count of bursts varies a little.
    return WorkloadSpec(events=events, failures_per_server=signatures * 5 // 32 + 1, fresh_failures=True,
                        burst_min=max(1, mean // 2), burst_max=max(1, mean + mean // 2))


def points(quick: bool) -> list[tuple[str, WorkloadSpec]]:
    """The curve's points: (label, stream)."""
    sizes = (10_000, 50_000) if quick else (10_000, 100_000, 1_000_000)
    spread, counts = (20_000, (1_000, 10_000)) if quick else (200_000, (1_000, 10_000, 100_000))
    return ([(f"{n:,} events", WorkloadSpec(events=n)) for n in sizes]
            + [(f"~{s:,} signatures in {spread:,} events", signature_spec(spread, s)) for s in counts])


def bench(quick: bool) -> str:
    """Every point in a fresh process, one after another."""
    context = multiprocessing.get_context("spawn")
    rows = []
    for label, spec in points(quick):
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            rows.append(pool.submit(run_point, label, spec).result().row())
    return "scale: " + "; ".join(rows)
