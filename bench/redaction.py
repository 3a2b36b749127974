"""Redaction's cost per event on the e2e stream, against the build before the rule set and prefilter.

The e2e benchmark's stream (the sample services' bursts, all four shapes, seed 7) is decoded once; then
`redact_event` runs over every event, in alternating rounds, with this build's `Redactor` and with the
redactor of the baseline build, whose `analysis/intake/redact.py` is read from git (`git show`) and
loaded as a module of its own, so both are measured in one process on the same events. Each round
starts from a fresh redactor, as a service does. The baseline redacts fewer fields (message, exception
values, raw trace, extras); this build redacts every text of the event and many more kinds.
"""

from __future__ import annotations

import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from analysis.errors import BadInput
from analysis.event import ErrorEvent
from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.redact import KINDS, Redactor, redact_event
from demo.services import build_sample_repos
from demo.stream import build_stream

BASELINE = "e44160b"
"""The last commit before the rule set and prefilter (main's layout commit)."""
_ROOT = Path(__file__).resolve().parents[1]


def load_baseline(rev: str = BASELINE) -> ModuleType:
    """The baseline build's redaction module, loaded under its own name."""
    source = subprocess.run(["git", "show", f"{rev}:analysis/intake/redact.py"], cwd=_ROOT, check=True,
                            capture_output=True, text=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(source)
    spec = importlib.util.spec_from_file_location("baseline_redact", handle.name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    Path(handle.name).unlink()
    return module


def stream_events(n_events: int) -> list[ErrorEvent]:
    """The e2e stream's messages decoded (unredacted); malformed ones are left out."""
    with tempfile.TemporaryDirectory(prefix="bench-redaction-") as tmp:
        stream = build_stream(build_sample_repos(Path(tmp) / "samples"), n_events, seed=7)
    config = DecodeConfig(max_message_bytes=16 * 1024 * 1024)
    events: list[ErrorEvent] = []
    for message in stream.messages:
        try:
            events.extend(decode_message(message.value, config, received_at=1.7e9))
        except BadInput:
            continue
    return events


def _micros_per_event(events: list[ErrorEvent], redact: Callable[[ErrorEvent, object], object],
                      redactor: object) -> float:
    started = time.perf_counter()
    for event in events:
        redact(event, redactor)
    return (time.perf_counter() - started) / len(events) * 1e6


def measure(n_events: int, rounds: int, rev: str = BASELINE) -> tuple[float, float]:
    """Median µs per event of (this build, the baseline) over `rounds` alternating rounds."""
    baseline = load_baseline(rev)
    events = stream_events(n_events)
    Redactor()  # the prefilter compiles once per process; a service pays it at start-up
    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(_micros_per_event(events, redact_event, Redactor()))  # type: ignore[arg-type]
        theirs.append(_micros_per_event(events, baseline.redact_event, baseline.Redactor()))
    return statistics.median(ours), statistics.median(theirs)


def bench(quick: bool) -> str:
    """Quick: 5k events, 5 rounds; full: 40k events, 7 rounds."""
    ours, theirs = measure(5_000 if quick else 40_000, 5 if quick else 7)
    return (f"redaction: {ours:.1f} us/event = {ours / theirs:.2f}x the baseline build {BASELINE} "
            f"({theirs:.1f} us/event) on the e2e stream, every field and {len(KINDS)} kinds vs 4 fields and 13 kinds")
