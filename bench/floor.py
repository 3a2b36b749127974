"""Grouping against the least any Python grouping costs, on real traces and on a stream of new traces.

The Python floor loop (`bench.grouping.run_python_floor`) decodes each line with orjson, reads eight
fields and counts them in a dict: no validation, no trace, no signature, no window. Log Agent's in-process
grouping (`bench.grouping.run_logagent`: the key stage's read, redaction included, and the window's
count, as the service does them) runs on the same lines, in turns with it and with bare `orjson.loads`,
timed in CPU seconds.

- Real traces (`bench.realtraces`): traces printed by really running buggy services in each language,
  fresh ids in every event, lines moved by every deploy. Target: at least 0.5x the floor.
- Churn (`WorkloadSpec.fresh_failures`, bursts of one): every event is a failure never seen before, so
  every cache misses. Target: at least 0.1x the floor.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench import realtraces
from bench.grouping import run_logagent, run_orjson, run_python_floor
from bench.timing import interleaved, ratio
from bench.workload import WorkloadSpec, generate
from consumer.runner import configure_gc

REAL_TRACE_TARGET = 0.5
CHURN_TARGET = 0.1


def against_floor(lines: Sequence[bytes], repetitions: int) -> tuple[str, float]:
    """`rate = ratio python-floor, ratio orjson (...)` for these lines, and the median ratio to the floor."""
    signatures: list[int] = []
    timings = interleaved({"logagent": lambda: signatures.append(run_logagent(lines)[1]),
                           "python-floor": lambda: run_python_floor(lines),
                           "orjson": lambda: run_orjson(lines)}, repetitions)
    ours, floor = timings["logagent"], timings["python-floor"]
    to_floor = ratio(ours, floor)
    text = (f"{ours.rate_text(len(lines))} = {to_floor.text()} python-floor (turns {to_floor.spread()}), "
            f"{ratio(ours, timings['orjson']).text()} orjson-decode (python-floor "
            f"{floor.rate_text(len(lines))}, orjson {timings['orjson'].rate_text(len(lines))}; "
            f"{signatures[0]} signatures)")
    return text, to_floor.median


def churn_lines(events: int) -> list[bytes]:
    """`events` events, each of a failure of its own: every trace (or message) is new."""
    spec = WorkloadSpec(events=events, failures_per_server=events // 8 + 1, burst_min=1, burst_max=1,
                        concurrent_bursts=1, fresh_failures=True)
    return [event.line for event in generate(spec)]


def verdict(value: float, target: float) -> str:
    """`[target >= 0.5x: met]` or `... not met`."""
    return f"[target >= {target}x: {'met' if value >= target else 'NOT met'}]"


def bench(quick: bool) -> str:
    """Quick: 20k real-trace events and 5k churn events, 3 repetitions; full: 100k and 30k, 5."""
    configure_gc()
    repetitions = 3 if quick else 5
    stream = realtraces.build(20_000 if quick else 100_000)
    real_text, real = against_floor([event.line for event in stream.events], repetitions)
    lines = churn_lines(5_000 if quick else 30_000)
    churn_text, churn = against_floor(lines, repetitions)
    return (f"floor: {stream.describe()}: {real_text} {verdict(real, REAL_TRACE_TARGET)}; churn (every trace "
            f"new, {len(lines)} events): {churn_text} {verdict(churn, CHURN_TARGET)}; CPU time, "
            f"{repetitions} repetitions in turns")
