"""Grouping throughput: decode + fingerprint + burst window in process, against Drain3 and bare orjson.

Every contender reads the same generated stream in the same run, timed in CPU seconds, in turns
(`bench.timing`); Drain3 mines the whole stream. Log Agent reads the Kafka message bytes
exactly as the consumer does (`KeyReader.read_sightings`, the key stage's read with redaction, then
`BurstWindow.add`, the window stage's count). Drain3 is
handed the text it mines already extracted (message plus trace), which spares it the JSON decode: the
comparison favours the peer. `orjson.loads` of the same bytes is the floor: reading the events at all.
A fourth loop shows what any grouping written in Python costs at the least: it decodes each line, reads a
few fields and counts them in a dict, with no validation, no trace and no signature.
"""

from __future__ import annotations

import cProfile
import io
import pstats
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from analysis.intake.decode import DecodeConfig
from analysis.intake.redact import RedactionConfig, Redactor
from bench.timing import Timing, interleaved, kilo, ratio
from bench.workload import WorkloadEvent, WorkloadSpec, generate
from consumer.keying import KeyReader
from consumer.runner import configure_gc
from consumer.settings import WindowSettings
from consumer.window import BuildSamples, BurstWindow
from consumer.window_stage import sample_builder

_TP = ("errors", 0)
_RECEIVED_AT = 1_717_000_000.0  # the broker timestamp, for events without a time

# Drain3's usual masking: IPv4 addresses, hex literals, long hex ids, and numbers.
DRAIN3_MASKING = (
    (r"((?<=[^A-Za-z0-9])|^)(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})((?=[^A-Za-z0-9])|$)", "IP"),
    (r"((?<=[^A-Za-z0-9])|^)(0x[a-fA-F0-9]+)((?=[^A-Za-z0-9])|$)", "HEX"),
    (r"((?<=[^A-Za-z0-9])|^)([a-fA-F0-9]{8,})((?=[^A-Za-z0-9])|$)", "HEX"),
    (r"((?<=[^A-Za-z0-9])|^)([\-\+]?\d+)((?=[^A-Za-z0-9])|$)", "NUM"),
)


@dataclass(frozen=True)
class GroupingResult:
    """Events per second of each contender and how many groups each found."""

    events: int
    timings: dict[str, Timing]
    bursts: int
    signatures: int
    true_groups: int
    drain3_clusters: int

    def line(self) -> str:
        """The one-line summary: rates per CPU second, best (median) of the repetitions."""
        t = self.timings
        ours = t["logagent"]
        return (f"grouping: {ours.rate_text(self.events)} = {ratio(ours, t['drain3']).text()} drain3, "
                f"{ratio(ours, t['drain3-message']).text()} drain3-message-line, "
                f"{ratio(ours, t['python-floor']).text()} python-floor, "
                f"{ratio(ours, t['orjson']).text()} orjson-decode (drain3 {t['drain3'].rate_text(self.events)} "
                f"on message + trace, {t['drain3-message'].rate_text(self.events)} on the message line alone, "
                f"orjson {t['orjson'].rate_text(self.events)}, python-floor "
                f"{t['python-floor'].rate_text(self.events)} = {ratio(t['python-floor'], t['orjson']).text()} "
                f"orjson; CPU time, {len(ours.seconds)} repetitions in turns; {self.events} events; signatures "
                f"{self.signatures} vs {self.true_groups} true (server, failure) groups, drain3 "
                f"{self.drain3_clusters} templates; {self.bursts} bursts)")


def run_logagent(lines: Sequence[bytes], build_samples: BuildSamples | None = None) -> tuple[int, int]:
    """What the service does per event: the key stage's read (`KeyReader.read_sightings`: the quick key,
    redaction included) and the window's count, with its samples built at close (by `build_samples`, the
    service's own builder unless given); returns the bursts closed and the distinct signatures."""
    window_settings = WindowSettings()
    config = DecodeConfig()
    redactor = Redactor(RedactionConfig())
    reader = KeyReader(config, redactor)
    window = BurstWindow(window_settings.quiet_s, window_settings.max_length_s, window_settings.max_open,
                         window_settings.max_samples, build_samples or sample_builder(config, redactor))
    keys: set[tuple[str, str]] = set()
    closed = 0
    for offset, raw in enumerate(lines):
        for index, sighting in enumerate(reader.read_sightings(raw, _RECEIVED_AT)):
            keys.add((sighting.server, sighting.fingerprint))
            closed += len(window.add(sighting, (raw, index, sighting.timestamp), (_TP, offset), sighting.timestamp))
    closed += len(window.flush())
    return closed, len(keys)


def run_drain3(texts: Sequence[str]) -> int:
    """Drain3 (with masking) mines every text; returns how many templates it found."""
    # drain3 ships no type information.
    from drain3 import TemplateMiner
    from drain3.masking import MaskingInstruction
    from drain3.template_miner_config import TemplateMinerConfig

    config = TemplateMinerConfig()
    config.masking_instructions = [MaskingInstruction(pattern, mask) for pattern, mask in DRAIN3_MASKING]
    config.profiling_enabled = False
    miner = TemplateMiner(config=config)
    for text in texts:
        miner.add_log_message(text)
    return len(miner.drain.clusters)


def run_orjson(lines: Sequence[bytes]) -> None:
    """`orjson.loads` every line: the cost of reading the events at all."""
    loads = orjson.loads
    for raw in lines:
        loads(raw)


FLOOR_FIELDS = ("server_id", "service.name", "app_name", "message", "@timestamp", "timestamp", "level", "log.level")


def run_python_floor(lines: Sequence[bytes]) -> int:
    """The least a grouping written in Python does per event: decode it, read eight fields into a tuple
    and count it in a dict. No validation, no trace parsing, no signature, no window. Returns the keys."""
    loads = orjson.loads
    counts: dict[tuple[object, ...], int] = {}
    for raw in lines:
        get = loads(raw).get
        record = tuple([get(field) for field in FLOOR_FIELDS])
        key = record[:3]
        counts[key] = counts.get(key, 0) + 1
    return len(counts)


def measure(events: Sequence[WorkloadEvent], repetitions: int = 3) -> GroupingResult:
    """Every contender on the same events, in the same process, in turns; Drain3 over the whole stream."""
    lines = [event.line for event in events]
    texts = [event.text for event in events]
    # Drain3's usual input is one log line; without the trace it cannot tell failure sites apart, but it
    # is the fastest the peer gets, so it is the honest bar for the speed target.
    message_lines = [text.split("\n", 1)[0] for text in texts]
    grouped: list[tuple[int, int]] = []
    templates: list[int] = []
    contenders = {
        "logagent": lambda: grouped.append(run_logagent(lines)),
        "drain3": lambda: templates.append(run_drain3(texts)),
        "drain3-message": lambda: run_drain3(message_lines),
        "orjson": lambda: run_orjson(lines),
        "python-floor": lambda: run_python_floor(lines),
    }
    timings = interleaved(contenders, repetitions)
    bursts, signatures = grouped[0]
    truth = len({(event.server, event.failure) for event in events})
    return GroupingResult(len(events), timings, bursts, signatures, truth, templates[0])


def churn(events: int, repetitions: int = 3) -> str:
    """Log Agent against orjson on a stream where nearly every burst is a new failure: the worst case for
    the caches, which miss and evict all the time."""
    stream = generate(WorkloadSpec(events=events, failures_per_server=events // 15, burst_min=1, burst_max=3,
                                   concurrent_bursts=50))
    lines = [event.line for event in stream]
    signatures: list[int] = []
    timings = interleaved({"logagent": lambda: signatures.append(run_logagent(lines)[1]),
                           "orjson": lambda: run_orjson(lines)}, repetitions)
    failures = len({(event.server, event.failure) for event in stream})
    return (f"distinct-failure stream: {timings['logagent'].rate_text(len(lines))} = "
            f"{ratio(timings['logagent'], timings['orjson']).text()} orjson-decode ({failures} failures, "
            f"{signatures[0]} signatures in {len(lines)} events; {kilo(len(lines) / timings['orjson'].best)}/s orjson)")


def bench(quick: bool) -> str:
    """One line: 6k events when quick, 100k when full, with the collector tuned as `logagent run` tunes
    it; then the same on a stream of mostly distinct failures (10k / 60k events)."""
    configure_gc()
    events = generate(WorkloadSpec(events=6_000 if quick else 100_000))
    return f"{measure(events).line()}; {churn(10_000 if quick else 60_000)}"


def profile(events: int = 50_000, top: int = 25) -> str:
    """cProfile of Log Agent's side only, sorted by own time: where the per-event cost goes."""
    lines = [event.line for event in generate(WorkloadSpec(events=events))]
    profiler = cProfile.Profile()
    profiler.enable()
    run_logagent(lines)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


# ---------------------------------------------------------------- one build against another
# `python -m bench.grouping --baseline PATH`: this build and the build checked out at PATH (e.g. a
# scratch `git worktree add` of main) each time `run_logagent` on the same stream, in turns, in fresh
# processes, so both see the same machine. CPU time, best of each turn's runs.

_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
from bench.grouping import run_logagent
from consumer.runner import configure_gc
configure_gc()
lines = open(sys.argv[2], "rb").read().split(b"\\n")
best = float("inf")
for _ in range(int(sys.argv[3])):
    started = time.process_time()
    run_logagent(lines)
    best = min(best, time.process_time() - started)
print(best)
"""


def compare(baseline: str, events: int = 20_000, turns: int = 4, runs: int = 3) -> str:
    """Events per CPU second of this build and of the build at `baseline`, in turns, on the grouping stream
    and on the distinct-failure stream."""
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    this = str(Path(__file__).resolve().parents[1])
    streams = {
        "grouping stream": generate(WorkloadSpec(events=events)),
        "distinct-failure stream": generate(WorkloadSpec(events=events // 2, failures_per_server=events // 30,
                                                         burst_min=1, burst_max=3, concurrent_bursts=50)),
    }
    parts = []
    for name, stream in streams.items():
        seconds: dict[str, list[float]] = {this: [], baseline: []}
        with tempfile.NamedTemporaryFile("wb", suffix=".jsonl") as lines:
            lines.write(b"\n".join(event.line for event in stream))
            lines.flush()
            for _ in range(turns):
                for build in (baseline, this):
                    out = subprocess.run([sys.executable, "-c", _CHILD, build, lines.name, str(runs)], check=True,
                                         capture_output=True, text=True, cwd=build,
                                         env={"PYTHONPATH": build, "PATH": "/usr/bin:/bin"}).stdout  # fmt: skip
                    seconds[build].append(float(out))
        ours, theirs = (len(stream) / min(seconds[build]) for build in (this, baseline))
        per_turn = ", ".join(f"{a / b:.2f}" for a, b in zip(seconds[baseline], seconds[this], strict=True))
        parts.append(f"{name}: {ours / 1000:.1f}k vs {theirs / 1000:.1f}k events per CPU second = {ours / theirs:.2f}x "
                     f"(best of {turns} turns; per turn {per_turn}; {len(stream)} events)")
    return "grouping, this build vs baseline: " + "; ".join(parts)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.grouping", description="this build against another")
    parser.add_argument("--baseline", required=True, help="path of the other build's checkout")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--turns", type=int, default=4)
    arguments = parser.parse_args()
    print(compare(arguments.baseline, arguments.events, arguments.turns))
