"""Grouping against the least any Python grouping costs, on real traces and on a stream of new traces.

The Python floor loop (`bench.grouping.run_python_floor`) decodes each line with orjson, reads eight
fields and counts them in a dict: no validation, no trace, no signature, no window. Log Agent's in-process
grouping (`bench.grouping.run_logagent`: the key stage's read, redaction included, and the window's
count, as the service does them) runs on the same lines, in turns with it and with bare `orjson.loads`,
timed in CPU seconds.

- Real traces (`bench.realtraces`): traces printed by really running buggy services in each language,
  fresh ids in every event, lines moved by every deploy. Target: at least 0.5x the floor. Two more
  contenders run on it: the least a repeated event needs in any grouping (`least_repeat_event`: decode,
  cut and compare the frame region, count; no validation, redaction or signature), and the samples Log
  Agent's window builds at close (`sample_builds`: 20 per burst, each decoded and redacted in full, as any
  grouping that hands out redacted samples must). The floor over their sum is the most such a grouping
  could reach.
- Churn (`WorkloadSpec.fresh_failures`, bursts of one): every event is a failure never seen before, so
  every cache misses. Target: at least 0.1x the floor. Two more contenders run on it: Drain3 on the same
  text (message and trace), the peer a user would run; and the least any grouping that redacts must do
  for an event never seen: decode it, one redaction prefilter scan of the whole message, one parse of its
  trace (`least_new_event`). Its ratio to the floor is the most a product could reach.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import orjson

from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.redact import Redactor
from analysis.intake.stacktrace import _parse as parse_uncached
from analysis.intake.structured import structured_chain
from bench import realtraces
from bench.grouping import run_drain3, run_logagent, run_orjson, run_python_floor
from bench.timing import Timing, interleaved, ratio
from bench.workload import WorkloadEvent, WorkloadSpec, generate
from consumer.runner import configure_gc
from consumer.window import RawSample, Sighting
from consumer.window_stage import sample_builder

REAL_TRACE_TARGET = 0.5
CHURN_TARGET = 0.1


def against_floor(lines: Sequence[bytes], repetitions: int,
                  more: dict[str, Callable[[], object]] | None = None) -> tuple[str, float, dict[str, Timing]]:
    """`rate = ratio python-floor, ratio orjson (...)` for these lines, the median ratio to the floor, and
    every contender's timing (`more` run in the same turns)."""
    signatures: list[int] = []
    timings = interleaved({"logagent": lambda: signatures.append(run_logagent(lines)[1]),
                           "python-floor": lambda: run_python_floor(lines),
                           "orjson": lambda: run_orjson(lines), **(more or {})}, repetitions)
    ours, floor = timings["logagent"], timings["python-floor"]
    to_floor = ratio(ours, floor)
    text = (f"{ours.rate_text(len(lines))} = {to_floor.text()} python-floor (turns {to_floor.spread()}), "
            f"{ratio(ours, timings['orjson']).text()} orjson-decode (python-floor "
            f"{floor.rate_text(len(lines))}, orjson {timings['orjson'].rate_text(len(lines))}; "
            f"{signatures[0]} signatures)")
    return text, to_floor.median, timings


def churn_events(events: int) -> list[WorkloadEvent]:
    """`events` events, each of a failure of its own: every trace (or message) is new."""
    spec = WorkloadSpec(events=events, failures_per_server=events // 8 + 1, burst_min=1, burst_max=1,
                        concurrent_bursts=1, fresh_failures=True)
    return list(generate(spec))


def churn_lines(events: int) -> list[bytes]:
    """The lines of `churn_events`."""
    return [event.line for event in churn_events(events)]


def least_new_event(lines: Sequence[bytes]) -> Callable[[], None]:
    """The least work an event never seen before needs in any grouping that redacts what it keeps: decode
    it, scan the whole message once with the redaction prefilter (which only names the rules that may
    match: no rule runs), parse its trace once. No fingerprint, no window, no redaction applied. Which
    trace each line holds is found beforehand, outside the timing, and the parse is the parser's own,
    without the caches (which a later repetition of the same lines would hit)."""
    config = DecodeConfig()
    traces: list[dict[str, Any] | str] = []
    for raw in lines:
        doc = orjson.loads(raw)
        exception = doc.get("exception") if type(doc) is dict else None
        traces.append(exception if type(exception) is dict else decode_message(raw, config, 0.0)[0].raw_trace)
    scan = Redactor()._prefilter.hits  # the one Hyperscan pass redaction starts every text with

    def run() -> None:
        loads = orjson.loads
        for raw, trace in zip(lines, traces, strict=True):
            loads(raw)
            scan(raw.decode())
            if isinstance(trace, dict):
                structured_chain(trace, config.max_frames)
            elif trace:
                parse_uncached(trace, config.max_frames)
    return run


class _Burst:
    __slots__ = ("at", "count", "last", "ring")

    def __init__(self) -> None:
        self.count, self.last, self.ring, self.at = 0, 0.0, [b""] * 20, 0


def least_repeat_event(lines: Sequence[bytes]) -> Callable[[], None]:
    """The least work a repeated event needs in any grouping, written for the real-trace stream's four shapes
    (a general reader can only do more): decode it; one lookup of its layout's reader; its other fields read
    at once; its trace's frame region cut with one `find` or `rfind` (a structured one written out) and
    compared with the one cached under those fields; the event time from a cached second; the carried
    message found by one lookup; then in its burst a count, the latest time and a ring of raw samples. No
    validation, no redaction, no signature: a changed frame region is recognised, never parsed. A bound,
    not a grouping."""

    def reader(doc: dict[str, Any]) -> tuple[Any, str, str] | None:
        if "resourceLogs" in doc:
            return None
        time_key = "@timestamp" if "@timestamp" in doc else "timestamp"
        trace_key = next(key for key in ("error.stack_trace", "stack_trace", "exception") if key in doc)
        slots = {time_key, trace_key, "message", "error.message"}
        return operator.itemgetter(*[key for key in doc if key not in slots]), time_key, trace_key

    def run() -> None:
        loads = orjson.loads
        readers: dict[tuple[str, ...], tuple[Any, str, str] | None] = {}
        seconds: dict[str, float] = {}
        regions: dict[tuple[Any, int], str] = {}
        carried: dict[tuple[Any, str], str] = {}
        bursts: dict[tuple[Any, int], _Burst] = {}
        for raw in lines:
            doc = loads(raw)
            layout = tuple(doc)
            if layout not in readers:
                readers[layout] = reader(doc)
            read = readers[layout]
            if read is None:  # OTLP: one record, its trace among the record's attributes
                resource = doc["resourceLogs"][0]
                record = resource["scopeLogs"][0]["logRecords"][0]
                kept = orjson.dumps(resource["resource"])
                trace = next(a["value"]["stringValue"] for a in record["attributes"]
                             if a["key"] == "exception.stacktrace")
                moment = int(record["timeUnixNano"]) / 1e9
            else:
                kept, time_key, trace_key = read[0](doc), read[1], read[2]
                trace, moment = doc[trace_key], doc[time_key]
                if type(moment) is str:  # ISO 8601 to the millisecond; else epoch seconds
                    second = seconds.get(moment[:19])
                    if second is None:
                        second = seconds[moment[:19]] = datetime.fromisoformat(moment[:19] + "+00:00").timestamp()
                    moment = second + int(moment[20:23]) / 1000
            if type(trace) is dict:
                region, header = orjson.dumps(trace["stacktrace"]).decode(), trace["value"]
            elif trace.startswith("Traceback"):
                cut = trace.rfind("\n")
                region, header = trace[:cut], trace[cut:]
            else:
                cut = trace.find("\n")
                region, header = trace[cut:], trace[:cut]
            key = (kept, len(region))
            if regions.get(key) != region:
                regions[key] = region
            if (key, header) not in carried:
                carried[key, header] = header
            burst = bursts.get(key)
            if burst is None:
                burst = bursts[key] = _Burst()
            burst.count += 1
            burst.last = max(burst.last, moment)
            burst.ring[burst.at] = raw
            burst.at = (burst.at + 1) % 20
    return run


def sample_builds(lines: Sequence[bytes]) -> Callable[[], None]:
    """The samples Log Agent's window builds at close for these lines (each decoded and redacted in full), as
    one run of `run_logagent` asked for them, built again: work any grouping that hands out redacted samples
    must do, which the floor does not."""
    config, redactor = DecodeConfig(), Redactor()
    build = sample_builder(config, redactor)
    asked: list[tuple[list[RawSample], Sighting]] = []

    def record(raw: Sequence[RawSample], first: Sighting) -> Any:
        asked.append((list(raw), first))
        return build(raw, first)

    run_logagent(lines, record)

    def run() -> None:
        for raw, first in asked:
            build(raw, first)
    return run


def verdict(value: float, target: float) -> str:
    """`[target >= 0.5x: met]` or `... not met`."""
    return f"[target >= {target}x: {'met' if value >= target else 'NOT met'}]"


def bench(quick: bool) -> str:
    """Quick: 20k real-trace events and 5k churn events, 3 repetitions; full: 100k and 30k, 5."""
    configure_gc()
    repetitions = 3 if quick else 5
    stream = realtraces.build(20_000 if quick else 100_000)
    real_lines = [event.line for event in stream.events]
    real_text, real, real_timings = against_floor(real_lines, repetitions, {
        "least-repeat": least_repeat_event(real_lines), "sample-builds": sample_builds(real_lines)})
    repeat, builds, floor = (real_timings[name] for name in ("least-repeat", "sample-builds", "python-floor"))
    bound = floor.best / (repeat.best + builds.best)
    events = churn_events(5_000 if quick else 30_000)
    lines, texts = [event.line for event in events], [event.text for event in events]
    churn_text, churn, timings = against_floor(lines, repetitions, {
        "drain3": lambda: run_drain3(texts), "least-new-event": least_new_event(lines)})
    least = ratio(timings["least-new-event"], timings["python-floor"])
    return (f"floor: {stream.describe()}: {real_text} {verdict(real, REAL_TRACE_TARGET)}; the least a repeated "
            f"event needs (decode, one reader lookup, the frame region cut and compared, a cached second, "
            f"a count and a sample ring) {ratio(repeat, floor).text()} python-floor, and with the samples the "
            f"window builds at close ({builds.best / len(real_lines) * 1e6:.2f} µs per event) {bound:.2f}x "
            f"python-floor (best turns), the most a grouping that keeps redacted samples could reach; churn "
            f"(every trace new, {len(lines)} events): {churn_text} {verdict(churn, CHURN_TARGET)}, "
            f"{ratio(timings['logagent'], timings['drain3']).text()} drain3 on the same text (drain3 "
            f"{timings['drain3'].rate_text(len(lines))}); the least a new event needs (decode, one redaction "
            f"prefilter scan, one trace parse) {timings['least-new-event'].rate_text(len(lines))} = "
            f"{least.text()} python-floor, the most any redacting grouping could reach; CPU time, "
            f"{repetitions} repetitions in turns")
