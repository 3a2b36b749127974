"""A check that a cost grows no faster than its input, in CPU time, on any machine.

A bound in seconds holds only on the machine it was set on: CI ran a 1.0 s rule in 1.7 s, and its 64 kB
input in 0.108 s, so the rule was as linear there as here. What these tests exist for is the growth: an
input four times larger costs four times more when the work is linear, sixteen times more when it is
quadratic. The check allows three times linear (twelve times): both sizes run on the same machine, so a
slower one changes nothing; noise only ever adds time, so each size keeps the least of its runs (two of
the smaller, up to three of the larger while it fails). The slack is for the processor's caches: a
character costs more once the text and the regex engine's state outgrow them, a step seen once per
cache level, never again at the next size. Measured here: the card rule's run of `.4`, 43 ns a
character at 64 kB and 117-123 ns from 256 kB to 4 MB (2.7 times); an identifier's, 26 ns at 256 kB and
52-56 ns from 1 MB (2.1 times). Quadratic work grows four times a character at every step. Speed itself
is measured by the benchmarks under `bench/`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import TypeVar

T = TypeVar("T")

PART = 4
SLACK = 3
# Below this, a run is too short for its ratio to mean anything, and nothing this cheap matters.
FLOOR_S = 0.1
# Not a speed target: it stops a runaway rule from holding up the suite for minutes.
CEILING_S = 10.0


def cpu_seconds(work: Callable[[], object]) -> float:
    """CPU time of this thread for one call: it holds on a loaded machine, where wall time would not, and
    leaves out other threads' (the redaction prefilter compiles in one, 3-5 s on a machine without it cached)."""
    started = time.thread_time()
    work()
    return time.thread_time() - started


def least_cpu_seconds(measure: Callable[[], float], fails: Callable[[float], bool]) -> float:
    """One `measure`; while that `fails`, the least of up to three (below the ceiling)."""
    elapsed = measure()
    for _ in range(2):
        if not fails(elapsed) or elapsed > CEILING_S:
            break
        elapsed = min(elapsed, measure())
    return elapsed


def superlinear(part_s: float, whole_s: float, ratio: float = PART) -> bool:
    """Whether `whole_s`, for an input `ratio` times the one that took `part_s`, grew faster than three times
    linear, or past the ceiling."""
    return whole_s > CEILING_S or whole_s > max(FLOOR_S, SLACK * ratio * part_s)


def assert_linear(run: Callable[[T], object], build: Callable[[int], T], size: int, what: str = "") -> None:
    """`run` on `build(size)` costs at most three times linear against `build(size // 4)`.

    Each run gets an input built anew and is timed alone. The product's caches must not carry from one run
    to the next (a warm run of the small input against a cold one of the large is no comparison): `run`
    makes its own caching objects, and `build` makes inputs the product's module caches have not seen when
    it has any that would hold them.
    """

    def once(at: int) -> float:
        given = build(at)
        return cpu_seconds(lambda: run(given))

    part = min(once(size // PART), once(size // PART))
    whole = least_cpu_seconds(lambda: once(size), partial(superlinear, part))
    assert not superlinear(part, whole), (
        f"{what}: {whole:.2f}s CPU at size {size:,} against {part:.3f}s at a quarter of it")


def repeated(unit: str, size: int, head: str = "", tail: str = "") -> str:
    """`head`, then `unit` over as many whole times as fit in `size` characters, then `tail`."""
    return head + unit * max(1, size // len(unit)) + tail


def scaled(*pieces: str | tuple[str, int]) -> Callable[[int], str]:
    """A text in `pieces`: each `(unit, times)` is repeated `times * size // 4` times, each string kept as it
    is; `assert_linear(run, scaled(...), 4)` then times the text whole against a quarter of it."""

    def build(size: int) -> str:
        return "".join(piece if isinstance(piece, str) else piece[0] * max(1, piece[1] * size // PART)
                       for piece in pieces)

    return build
