"""Memory footprint of the burst windows: RSS with 100k open bursts, and after they are evicted.

Every burst is a distinct (server, signature) with one decoded event in it, the worst case for memory
per event. The peer is the floor: simply holding the same raw messages in memory. RSS comes from
/proc/self/status (VmRSS), so no extra package is needed; it is Linux-only.
"""

from __future__ import annotations

import ctypes
import dataclasses
import gc
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.signature import fingerprint_event
from bench.workload import WorkloadSpec, generate
from consumer.window import BurstWindow

_TP = ("errors", 0)
_MB = 1024 * 1024


def rss_bytes() -> int:
    """The resident set size of this process, from /proc/self/status."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status (not Linux?)")


@dataclass(frozen=True)
class FootprintResult:
    """RSS deltas, in bytes."""

    bursts: int
    open_delta: int
    after_evict_delta: int
    raw_delta: int
    raw_bytes: int

    def line(self) -> str:
        """One-line summary."""
        return (f"footprint: {self.bursts // 1000}k open bursts = +{self.open_delta / _MB:.0f} MB RSS "
                f"({self.open_delta / self.bursts:.0f} B/burst) = {self.open_delta / self.raw_delta:.2f}x "
                f"holding the raw messages (+{self.raw_delta / _MB:.0f} MB for {self.raw_bytes / _MB:.0f} MB "
                f"of JSON); after eviction and malloc_trim +{self.after_evict_delta / _MB:.0f} MB")


def measure(bursts: int) -> FootprintResult:
    """Both sides, each in a fresh process: freed memory kept by the allocator must not blur the other."""
    # Imported here, in the parent only: the settings pull in the LLM client, slow to start in each child.
    from consumer.settings import WindowSettings

    window = WindowSettings()
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        opened, evicted = pool.submit(window_rss, bursts, window.quiet_s, window.max_length_s,
                                      window.max_samples).result()
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        raw_delta, raw_bytes = pool.submit(raw_rss, bursts).result()
    return FootprintResult(bursts, opened, evicted, raw_delta, raw_bytes)


def _base_lines() -> list[bytes]:
    return [event.line for event in generate(WorkloadSpec(events=2_000, seed=5))]


def window_rss(bursts: int, quiet_s: float, max_length_s: float, max_samples: int) -> tuple[int, int]:
    """RSS growth with `bursts` open bursts, and what is left of it after they are all evicted."""
    base_lines = _base_lines()
    window = BurstWindow(quiet_s, max_length_s, max_open=bursts + 1, max_samples=max_samples)
    decode = DecodeConfig()
    gc.collect()
    before = rss_bytes()
    for i in range(bursts):
        raw = base_lines[i % len(base_lines)]
        for event in decode_message(raw, decode):
            # A fleet: the same failures on many pods, each (pod, signature) its own burst.
            pod_event = dataclasses.replace(event, server_id=f"{event.server_id}-pod-{i}")
            window.add(pod_event, fingerprint_event(pod_event), (_TP, i))
    gc.collect()
    opened = rss_bytes()
    if window.open_count < bursts:
        raise RuntimeError(f"only {window.open_count} bursts opened, expected {bursts}")
    closed = window.flush()
    del closed
    gc.collect()
    # Freed small strings stay in the C heap until trimmed; trimming shows what is really still held.
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return opened - before, rss_bytes() - before


def raw_rss(bursts: int) -> tuple[int, int]:
    """RSS growth from holding the same `bursts` raw messages, and their total size."""
    base_lines = _base_lines()
    gc.collect()
    before = rss_bytes()
    held = [bytes(bytearray(base_lines[i % len(base_lines)])) for i in range(bursts)]  # real copies
    return rss_bytes() - before, sum(len(line) for line in held)


def bench(quick: bool) -> str:
    """30k open bursts when quick, 100k when full."""
    return measure(30_000 if quick else 100_000).line()
