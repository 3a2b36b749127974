"""Memory on hostile input: RSS while gigabytes of distinct large events go through the intake path.

Every message is a different failure of about 1 MiB, in turn each of the shapes that fill a cache or a
burst: a huge message, a long exception value with thousands of structured frames, Java, Python and
Node traces of thousands of distinct frame lines, an OpenTelemetry batch, unknown fields holding long
strings and long lists of numbers, and text of wide characters. They go through what the consumer
does with each message: `decode_message` → `redact_event` → `fingerprint_event` → `BurstWindow.add`
(settings at their defaults). Peak RSS comes from /proc/self/status (VmHWM); the peer is the floor,
the same messages decoded and dropped. Each side runs in a fresh process.
"""

from __future__ import annotations

import gc
import multiprocessing
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import orjson

from bench.rss import peak_rss_bytes, rss_bytes

_MIB = 1 << 20
_SIZE = _MIB - 8 * 1024  # under the default 1 MiB input cap, so every message is decoded
_TP = ("errors", 0)
_CHART_LIMIT = 2 << 30
SHAPES = ("message", "structured", "java", "python", "node", "otel", "extra", "wide")


def hostile_message(index: int, size: int = _SIZE) -> bytes:
    """The `index`-th distinct message of about `size` bytes, of shape SHAPES[index % len(SHAPES)]."""
    shape = SHAPES[index % len(SHAPES)]
    tag = f"{index:08d}"
    base = {"server_id": f"svc-{index % 97}", "timestamp": 1_700_000_000 + index, "level": "error"}
    if shape == "message":
        return orjson.dumps({**base, "message": f"failure {tag} " + "m" * (size - 200)})
    if shape == "structured":
        frames = [{"function": f"handler_{tag}_{i}_" + "f" * 400, "filename": f"app/mod_{tag}_{i}.py",
                   "lineno": i + 1, "in_app": True} for i in range(size // 560)]
        exception = {"type": f"Err{tag}", "value": "v" * (size // 10), "stacktrace": frames}
        return orjson.dumps({**base, "message": f"structured {tag}", "exception": exception})
    if shape in ("java", "python", "node"):
        lines = size // {"java": 78, "python": 50, "node": 72}[shape]
        if shape == "java":
            text = "\n".join(f"\tat com.acme.svc{tag}.Module{i}.handle{i}(Module{i}.java:{i + 1})"
                               for i in range(lines))
            trace = f"java.lang.IllegalStateException: failure {tag}\n{text}"
        elif shape == "python":
            text = "\n".join(f'  File "/app/svc_{tag}/module_{i}.py", line {i + 1}, in handle_{i}\n    x()'
                               for i in range(lines // 2))
            trace = f"Traceback (most recent call last):\n{text}\nValueError: failure {tag}"
        else:
            text = "\n".join(f"    at handle{i}_{tag} (/app/svc/module_{tag}_{i}.js:{i + 1}:7)"
                               for i in range(lines))
            trace = f"TypeError: failure {tag}\n{text}"
        return orjson.dumps({"@timestamp": "2026-01-01T00:00:00.000Z", "service.name": base["server_id"],
                             "log.level": "error", "message": f"{shape} {tag}", "error.stack_trace": trace})
    if shape == "otel":
        records = [{"timeUnixNano": str(1_700_000_000_000_000_000 + index), "severityText": "ERROR",
                    "body": {"stringValue": f"otel {tag} {r} " + "b" * (size // 100)},
                    "attributes": [{"key": "exception.type", "value": {"stringValue": f"E{tag}{r}"}}]}
                   for r in range(90)]
        resource = {"attributes": [{"key": "service.name", "value": {"stringValue": base["server_id"]}}]}
        return orjson.dumps({"resourceLogs": [{"resource": resource, "scopeLogs": [{"logRecords": records}]}]})
    if shape == "extra":
        return orjson.dumps({**base, "message": f"extra {tag}", "payload": "p" * (size // 2),
                             "samples": [1.5] * (size // 9)})
    return orjson.dumps({**base, "message": f"wide {tag} " + "\U0001f525" * ((size - 200) // 4)})


def _messages(count: int, size: int) -> Iterator[bytes]:
    return (hostile_message(i, size) for i in range(count))


@dataclass(frozen=True)
class BoundedResult:
    """Peak RSS growth of the intake path and of the floor, in bytes; the caches' charge at the end."""

    events: int
    input_bytes: int
    peak_delta: int
    floor_delta: int
    cache_bytes: int
    cache_budget: int
    window_bytes: int
    window_budget: int

    def line(self) -> str:
        """One-line summary."""
        return (f"bounded: {self.events} distinct hostile messages ({self.input_bytes / (1 << 30):.2f} GiB, "
                f"{len(SHAPES)} shapes) through decode, redact, fingerprint and window: peak RSS "
                f"+{self.peak_delta / _MIB:.0f} MiB = {self.peak_delta / _CHART_LIMIT:.2f}x the chart's 2 GiB limit, "
                f"{self.peak_delta / max(self.floor_delta, 1):.1f}x the floor (decode and drop: "
                f"+{self.floor_delta / _MIB:.0f} MiB); caches charged {self.cache_bytes / _MIB:.0f} of "
                f"{self.cache_budget / _MIB:.0f} MiB, open bursts {self.window_bytes / _MIB:.0f} of "
                f"{self.window_budget / _MIB:.0f} MiB")


def intake_peak(count: int, size: int) -> tuple[int, int, int, int, int, int]:
    """In a fresh process: peak RSS growth over the intake path, and the charges it ended with."""
    from analysis.cache import cache_bytes
    from analysis.intake.decode import DecodeConfig
    from analysis.intake.redact import Redactor
    from consumer.keying import KeyReader
    from consumer.runner import configure_gc
    from consumer.settings import Settings
    from consumer.window import BurstWindow
    from consumer.window_stage import sample_builder

    settings = Settings()
    w, decode = settings.window, DecodeConfig(max_message_bytes=settings.input.max_message_bytes)
    redactor = Redactor(settings.redaction)
    reader = KeyReader(decode, redactor)
    window = BurstWindow(w.quiet_s, w.max_length_s, w.max_open, w.max_samples, sample_builder(decode, redactor),
                         max_open_bytes=w.max_open_bytes)
    configure_gc()
    gc.collect()
    before, total = rss_bytes(), 0
    for offset, raw in enumerate(_messages(count, size)):
        total += len(raw)
        for index, sighting in enumerate(reader.read_sightings(raw, received_at=0.0)):
            window.add(sighting, (raw, index, sighting.timestamp), (_TP, offset), sighting.timestamp)
    charged = cache_bytes().values()
    return (peak_rss_bytes() - before, total, sum(used for used, _ in charged), sum(budget for _, budget in charged),
            window.open_bytes, window.max_open_bytes)


def floor_peak(count: int, size: int) -> int:
    """In a fresh process: peak RSS growth of decoding the same messages and keeping nothing."""
    from analysis.intake.decode import DecodeConfig, decode_message

    decode = DecodeConfig()
    gc.collect()
    before = rss_bytes()
    for raw in _messages(count, size):
        decode_message(raw, decode)
    return peak_rss_bytes() - before


def measure(count: int, size: int = _SIZE) -> BoundedResult:
    """Both sides, each in a fresh process."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        peak, total, cached, budget, held, window_budget = pool.submit(intake_peak, count, size).result()
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        floor = pool.submit(floor_peak, count, size).result()
    return BoundedResult(count, total, peak, floor, cached, budget, held, window_budget)


def bench(quick: bool) -> str:
    """512 messages when quick, 4,400 (over 4 GiB in all) when full."""
    return measure(512 if quick else 4400).line()
