"""A check that a cost grows no faster than its input, in CPU time, on any machine.

A bound in seconds holds only on the machine it was set on: CI ran a 1.0 s rule in 1.7 s, and its 64 kB
input in 0.108 s, so the rule was as linear there as here. What these tests exist for is the growth: an
input eight times larger costs eight times more when the work is linear, 64 times more when it is
quadratic. The check allows four times linear (32 times): both sizes run on the same machine, so a
slower one changes nothing; noise only ever adds time, so each size keeps the least of its runs (two of
the smaller, up to three of the larger while it fails). The slack is for a machine whose speed changes
between the two sizes (this VM's did, up to twice, within seconds) and for the processor's caches: a
character costs more once the text and the regex engine's state outgrow them, a step seen once per
cache level, never again at the next size. Measured here: the card rule's run of `.4`, 43 ns a
character at 64 kB and 117-123 ns from 256 kB to 4 MB (2.7 times); an identifier's, 26 ns at 256 kB and
52-56 ns from 1 MB (2.1 times). A check of a quarter at three times linear left a pure quadratic a
margin of 16 to 12, which a busy neighbour closed once.

Growth cannot see work quadratic only inside a block the product caps (a statement's 16 kB), which is
linear in the number of blocks, nor a quadratic part smaller than the slack (a review patched both in:
2.9 s a megabyte against 0.29 s, and growth passed). So the full size also has a budget: seconds on the
machine it was set on (two to five times what it cost there), scaled by how much slower this machine
runs a reference workload right after a run over its budget. Speed itself is measured by the
benchmarks under `bench/`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

PART = 8
SLACK = 4
# Below this, a run is too short for its ratio to mean anything, and nothing this cheap matters.
FLOOR_S = 0.1
# Not a speed target: it stops a runaway rule from holding up the suite for minutes.
CEILING_S = 10.0
# The reference: a regex's words over a megabyte, and its CPU time, least of three, on the machine the
# budgets were set on (a 2-core 2.6 GHz Xeon VM, 2026-12-07, idle: 0.058-0.068 s; at one moment its second
# processor took 0.127 s, and every test that ran there cost about twice as much).
_REFERENCE_TEXT = "user=bob id=4242 path=/a/b.c " * 36_000
_REFERENCE_WORDS = re.compile(r"[a-z]+|[0-9]+")
REFERENCE_S = 0.064


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
    """Whether `whole_s`, for an input `ratio` times the one that took `part_s`, grew faster than four times
    linear, or past the ceiling."""
    return whole_s > CEILING_S or whole_s > max(FLOOR_S, SLACK * ratio * part_s)


def _reference() -> None:
    for _ in _REFERENCE_WORDS.finditer(_REFERENCE_TEXT):
        pass


def slower() -> float:
    """How many times slower than the budgets' machine this one runs the reference now (at least 1)."""
    return max(1.0, min(cpu_seconds(_reference) for _ in range(3)) / REFERENCE_S)


def on_budgets_machine(elapsed: float, budget_s: float) -> float:
    """`elapsed` in seconds of the budgets' machine: divided by how much slower this one runs the reference
    right now, once it is over `budget_s` (never less than 1: a faster machine keeps the whole budget)."""
    return elapsed / slower() if elapsed > budget_s else elapsed


def over_budget(elapsed: float, budget_s: float) -> bool:
    """Whether `elapsed` is over `budget_s` seconds of the budgets' machine, on this one."""
    return on_budgets_machine(elapsed, budget_s) > budget_s


def assert_linear(run: Callable[[T], object], build: Callable[[int], T], size: int, budget_s: float,
                  what: str = "") -> None:
    """`run` on `build(size)` costs at most four times linear against `build(size // 8)`, and at most
    `budget_s` seconds of the budgets' machine.

    Each run gets an input built anew and is timed alone. The product's caches must not carry from one run
    to the next (a warm run of the small input against a cold one of the large is no comparison): `run`
    makes its own caching objects, and `build` makes inputs the product's module caches have not seen when
    it has any that would hold them. A failing full size runs again, up to three times, each run scaled by
    the reference measured right after it (this machine's speed changes within seconds under load).
    """

    def once(at: int) -> float:
        given = build(at)
        return cpu_seconds(lambda: run(given))

    part = min(once(size // PART), once(size // PART))
    whole = scaled_whole = CEILING_S * 2
    for _ in range(3):
        elapsed = once(size)
        whole, scaled_whole = min(whole, elapsed), min(scaled_whole, on_budgets_machine(elapsed, budget_s))
        if elapsed > CEILING_S or not (superlinear(part, whole) or scaled_whole > budget_s):
            break
    assert whole <= CEILING_S, f"{what}: {whole:.2f}s CPU at size {size:,}, over the {CEILING_S} s ceiling"
    assert not superlinear(part, whole), (
        f"{what}: {whole:.2f}s CPU at size {size:,} against {part:.3f}s at an eighth of it")
    assert scaled_whole <= budget_s, (
        f"{what}: {scaled_whole:.2f}s of the budgets' machine at size {size:,} ({whole:.2f}s CPU here), "
        f"over {budget_s} s")


def repeated(unit: str, size: int, head: str = "", tail: str = "") -> str:
    """`head`, then `unit` over as many whole times as fit in `size` characters, then `tail`."""
    return head + unit * max(1, size // len(unit)) + tail


def scaled(*pieces: str | tuple[str, int]) -> Callable[[int], str]:
    """A text in `pieces`: each `(unit, times)` is repeated `times * size // 8` times, each string kept as it
    is; `assert_linear(run, scaled(...), 8)` then times the text whole against an eighth of it."""

    def build(size: int) -> str:
        return "".join(piece if isinstance(piece, str) else piece[0] * max(1, piece[1] * size // PART)
                       for piece in pieces)

    return build
