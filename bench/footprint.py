"""Memory per open burst: the RSS the burst windows take, against the raw bytes of the events they keep.

A fleet's incident: the same failures on many pods, every (pod, failure) a burst of its own, each burst
fed enough events to fill its samples (`window.max_samples`). The messages go through the service's
per-message path (`bench.intake`: decode, redact, fingerprint, window) in a fresh process; measured is
its RSS growth (VmRSS) with every burst open, and again after all are evicted (and the C heap trimmed).
The bar is the raw bytes of the messages those bursts keep as samples: a burst can hold no less than
them. Holding the same messages as Python bytes objects, in another fresh process, is shown beside.

Two streams: real traces (`bench.realtraces`, about 1.2 kB a message) and short message-only logs
(about 300 bytes). Target: at most 2x the raw bytes held, on both.
"""

from __future__ import annotations

import gc
import multiprocessing
import random
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import orjson

from bench import realtraces
from bench.intake import Intake
from bench.rss import rss_bytes, trim
from bench.workload import commit_of, encode

_MB = 1024 * 1024
TARGET = 2.0
_SHAPES = ("ecs", "logstash", "native", "otel")


def short_bursts(bursts: int, per_burst: int, seed: int = 7) -> list[list[bytes]]:
    """Bursts of message-only logs, each on a pod of its own, every message with fresh ids."""
    rng = random.Random(seed)
    out = []
    for b in range(bursts):
        server = f"checkout-{b % 8}-pod-{b}"
        out.append([orjson.dumps(encode(
            _SHAPES[b % len(_SHAPES)], server=server, commit=commit_of(server, 0), now=1_733_000_000.0 + j * 0.05,
            message=f"upstream inventory-api returned 503 for order {rng.randrange(10**9, 10**10)} in "
                    f"{rng.randint(100, 9000)} ms (attempt {rng.randint(1, 5)}, pool checkout-db)"))
            for j in range(per_burst)])
    return out


@dataclass(frozen=True)
class FootprintResult:
    """RSS deltas and the raw bytes kept, in bytes."""

    name: str
    bursts: int
    per_burst: int
    open_delta: int
    after_evict_delta: int
    held_bytes: int
    held_rss: int

    def text(self) -> str:
        """One part of the line."""
        ratio = self.open_delta / self.held_bytes
        return (f"{self.name}: {self.bursts} open bursts of {self.per_burst} events = +{self.open_delta / _MB:.0f} MB "
                f"RSS ({self.open_delta / self.bursts / 1024:.1f} kB/burst) = {ratio:.2f}x the raw bytes they keep "
                f"({self.held_bytes / _MB:.0f} MB, {self.held_bytes / self.bursts / 1024:.1f} kB/burst) "
                f"[target <= {TARGET}x: {'met' if ratio <= TARGET else 'NOT met'}]; the same messages as bytes "
                f"objects +{self.held_rss / _MB:.0f} MB; after eviction and malloc_trim "
                f"+{self.after_evict_delta / _MB:.0f} MB")


def measure(name: str, bursts: list[list[bytes]]) -> FootprintResult:
    """Both sides, each in a fresh process: freed memory kept by the allocator must not blur the other."""
    blob = b"\n".join(line for burst in bursts for line in burst)
    per_burst = len(bursts[0])
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        opened, evicted, samples = pool.submit(window_rss, blob, len(bursts)).result()
    kept = samples // len(bursts)
    held = [line for burst in bursts for line in burst[:kept]]  # a burst's messages differ only in ids
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        held_rss = pool.submit(raw_rss, b"\n".join(held)).result()
    return FootprintResult(name, len(bursts), per_burst, opened, evicted, sum(map(len, held)), held_rss)


def window_rss(blob: bytes, bursts: int) -> tuple[int, int, int]:
    """RSS growth with every burst of `blob` open, what is left after they are evicted, and the samples
    the bursts kept in all."""
    lines = blob.split(b"\n")
    del blob
    intake = Intake(max_open=bursts + 1)
    gc.collect()
    before = rss_bytes()
    for raw in lines:
        intake.add(raw)
    gc.collect()
    opened = rss_bytes()
    if intake.window.open_count != bursts or intake.closed or intake.rejected:
        raise RuntimeError(f"{intake.window.open_count} bursts open, {intake.closed} closed, {intake.rejected} "
                           f"rejected; expected {bursts} open")
    closed = intake.window.flush()
    samples = sum(len(burst.cluster.samples) for burst in closed)
    del closed
    trim()
    return opened - before, rss_bytes() - before, samples


def raw_rss(blob: bytes) -> int:
    """RSS growth from holding the lines of `blob` as bytes objects (real copies)."""
    gc.collect()
    before = rss_bytes()
    held = blob.split(b"\n")
    grown = rss_bytes() - before
    del held
    return grown


def bench(quick: bool) -> str:
    """Quick: 2k bursts of 30 events each; full: 10k."""
    bursts = 2_000 if quick else 10_000
    real = measure("real traces", realtraces.pod_bursts(bursts, 30))
    short = measure("short messages", short_bursts(bursts, 30))
    return f"footprint: {real.text()}; {short.text()}"
