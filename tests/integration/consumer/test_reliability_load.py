"""Load and hostile input through the running pipeline on the real tansu broker.

- A stream far faster than analysis: fetching pauses, and the process's resident memory stays bounded.
- Hostile messages (10 MB, deeply nested JSON, invalid UTF-8, a 100k-frame trace) are decoded with
  truncation or dead-lettered with a reason, and the stream moves on.
- A flood of distinct fingerprints: open bursts never exceed the window cap (the oldest are evicted).
"""

from __future__ import annotations

import asyncio
import string
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from analysis.code.repo import RepoConfig, RepoSync
from analysis.event import Cluster
from analysis.report import Analysis
from bench.rss import rss_bytes
from consumer.explainer import HeuristicAnalyzer
from consumer.metrics import Metrics
from consumer.pipeline import Service
from demo.broker import EmbeddedBroker
from tests.conftest import KafkaIO, SettingsFactory, ShopRepos, make_settings, shop_error

pytestmark = pytest.mark.integration

T0 = 1_760_000_000.0
MB = 1 << 20


@dataclass
class SlowAnalyzer:
    """The real heuristic analyzer behind a fixed delay: analysis far slower than the stream."""

    inner: HeuristicAnalyzer
    delay_s: float

    async def analyze(self, cluster: Cluster) -> Analysis:
        await asyncio.sleep(self.delay_s)
        return await self.inner.analyze(cluster)


async def produce_large(bootstrap: str, topic: str, values: Sequence[bytes]) -> None:
    """Produce values up to 16 MB each (the default producer refuses records over 1 MB)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=16 * MB,
                                linger_ms=20)
    await producer.start()
    try:
        await asyncio.gather(*[await producer.send(topic, value=value) for value in values])
    finally:
        await producer.stop()


def word(n: int) -> str:
    """A letters-only word unique to `n` (digits would be masked out of a message signature)."""
    letters = string.ascii_lowercase
    out = ""
    while True:
        n, r = divmod(n, 26)
        out = letters[r] + out
        if n == 0:
            return "z" + out


async def run_observed(service: Service, done: Callable[[], bool], observe: Callable[[], None],
                       timeout_s: float) -> None:
    """Run `service`, calling `observe()` every 20 ms, until `done()`; then stop it."""
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    deadline = time.monotonic() + timeout_s
    try:
        while not done():
            assert not task.done(), "the service stopped by itself"
            assert time.monotonic() < deadline, f"not done in {timeout_s}s: {service.stats}"
            observe()
            await asyncio.sleep(0.02)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


class TestSlowConsumer:
    def test_a_stream_far_faster_than_analysis_pauses_fetching_and_keeps_memory_bounded(
            self, settings_factory: SettingsFactory, kafka_io: KafkaIO,
            shop_repos: Callable[..., ShopRepos]) -> None:
        """120 MB of input (6000 x 20 KB events, 1200 bursts) against 0.2 s analyses, one at a time: the
        consumer pauses, reads only a fraction while analysis lags, and RSS grows by < 48 MB.

        The bound: what backpressure lets the service hold is the queue (queue_size bursts x max_samples
        events x 20 KB = 0.4 MB), one fetch batch (max_poll_records x 20 KB = 2 MB), aiokafka's prefetch
        (max_partition_fetch_bytes 1 MB per partition) and allocator slack; buffering the stream instead
        would cost well over 100 MB."""
        repos = shop_repos("orders")
        commit = repos.commits["orders"]
        settings = settings_factory(partitions=2, kafka={"max_poll_records": 100},
                                    pipeline={"max_inflight": 1, "queue_size": 4, "resume_at": 1},
                                    window={"quiet_s": 0.5})
        padding = "x" * (20 * 1024)
        functions = ("total", "parse_qty", "split")
        stream = []
        for r in range(400):  # rounds 100 s apart: each round's events close the previous round's bursts
            for f, function in enumerate(functions):
                for i in range(5):
                    doc = orjson.loads(shop_error("orders", function, T0 + r * 100 + f + i * 0.05, commit, n=i))
                    doc["detail"] = padding
                    stream.append(orjson.dumps(doc))
        metrics = Metrics()
        service = Service(settings, SlowAnalyzer(HeuristicAnalyzer(RepoSync(repos.config)), 0.2), metrics)
        samples: list[tuple[int, float]] = []
        baseline: list[int] = []
        pending: list[asyncio.Task[None]] = []

        def observe() -> None:
            if not baseline:
                # Warm up (imports, first fetch, first analyses) before the baseline; then the flood.
                if service.stats.published >= 2:
                    baseline.append(rss_bytes())
                    pending.append(asyncio.ensure_future(
                        kafka_io.produce(settings.kafka.input_topic, stream[30:])))
                return
            samples.append((rss_bytes(), metrics.registry.get_sample_value("logagent_consumer_paused") or 0.0))

        async def scenario() -> None:
            await kafka_io.produce(settings.kafka.input_topic, stream[:30])
            await run_observed(service, lambda: service.stats.published >= 25, observe, 60)
            await asyncio.gather(*pending)

        asyncio.run(scenario())
        growth = max(rss for rss, _ in samples) - baseline[0]
        assert any(paused == 1.0 for _, paused in samples), "fetching never paused"
        assert service.stats.pauses >= 1
        # The key stage reads on (what it forwards waits in the repartition topic, not in this process);
        # the window stage, which holds bursts, is what pauses.
        assert service.stats.records_in < len(stream) / 2, f"read the stream instead of pausing: {service.stats}"
        assert growth < 48 * MB, f"RSS grew by {growth / MB:.1f} MB"


HUGE_FRAMES = 100_000


def hostile_messages() -> dict[str, bytes]:
    """Each hostile input, by name."""
    frames = [{"filename": f"app/gen_{i % 97}.py", "function": f"step_{i % 89}", "lineno": i % 500 + 1,
               "module": f"app.gen_{i % 97}"} for i in range(HUGE_FRAMES)]
    java = "java.lang.StackOverflowError: recursion\n" + "".join(
        f"\tat com.acme.deep.Recursor.step{i % 7}(Recursor.java:{i % 300 + 1})\n" for i in range(HUGE_FRAMES))
    return {
        "10 MB message": orjson.dumps({"server_id": "orders", "timestamp": T0, "message": "A" * (10 * MB)}),
        "deeply nested JSON": b'{"server_id": "orders", "message": "m", "x": ' + b"[" * 100_000 + b"]" * 100_000
                              + b"}",
        "invalid UTF-8": b'{"server_id": "orders", "timestamp": 1, "message": "\xff\xfe\xfa broken"}',
        "100k-frame native trace": orjson.dumps({
            "server_id": "deep", "timestamp": T0 + 1, "level": "error", "message": "RecursionError: deep",
            "exception": {"type": "RecursionError", "value": "maximum recursion depth", "stacktrace": frames}}),
        "100k-frame Java text trace": orjson.dumps({
            "@timestamp": "2025-10-09T12:00:00Z", "service.name": "deep-java", "log.level": "ERROR",
            "message": "request failed", "error.type": "java.lang.StackOverflowError",
            "error.message": "recursion", "error.stack_trace": java}),
    }


def run_stream(tansu: EmbeddedBroker, tmp_path: Path, stream: Sequence[bytes]) -> dict[str, Any]:
    """Run the service (9 MB input cap) over `stream` until idle; return its DLQ, outputs and commits."""
    settings = make_settings(tansu.bootstrap_servers, tmp_path / "data", partitions=1,
                             input={"max_message_bytes": 9 * MB}, window={"quiet_s": 0.3})
    service = Service(settings, HeuristicAnalyzer(RepoSync(RepoConfig(cache_dir=tmp_path / "cache"))),
                      Metrics())
    started = time.monotonic()

    async def scenario() -> None:
        await produce_large(tansu.bootstrap_servers, settings.kafka.input_topic, stream)
        await run_observed(service, lambda: service.stats.events_in == len(stream) and service.idle(),
                           lambda: None, 60)

    asyncio.run(scenario())
    io = KafkaIO(tansu.bootstrap_servers)
    return {
        "seconds": time.monotonic() - started,
        "dlq": {int(r.headers["source_offset"]): r.headers["reason"].decode()
                for r in asyncio.run(io.read_all(settings.kafka.dlq_topic))},
        "outputs": [orjson.loads(r.value)["data"] for r in asyncio.run(io.read_all(settings.kafka.output_topic))],
        "committed": asyncio.run(io.committed(settings.kafka.group_id, settings.kafka.input_topic)),
    }


class TestHostileInput:
    def test_hostile_messages_are_truncated_or_dead_lettered_and_the_stream_moves_on(
            self, tansu: EmbeddedBroker, tmp_path: Path) -> None:
        """Too deep and undecodable messages go to the DLQ with their reason; 100k-frame traces (native and
        raw Java text) are decoded with their frames capped and analysed; the good event after them too."""
        hostile = hostile_messages()
        stream = [hostile[name] for name in ("deeply nested JSON", "invalid UTF-8", "100k-frame native trace",
                                             "100k-frame Java text trace")]
        stream.append(shop_error("orders", "split", T0 + 50, None))
        run = run_stream(tansu, tmp_path, stream)
        assert run["dlq"] == {0: "too_deep", 1: "invalid_utf8"}
        servers = sorted(d["cluster"]["server"] for d in run["outputs"])
        assert servers == ["deep", "deep-java", "orders"], "both huge traces and the good event analysed"
        assert run["committed"] == {0: len(stream)}
        assert run["seconds"] < 60

    def test_a_10_mb_message_is_dead_lettered_and_the_stream_moves_on(
            self, tansu: EmbeddedBroker, tmp_path: Path) -> None:
        """A message over the input cap goes to the DLQ (reason too_large), even though it is larger than
        a producer request may be, and the good event after it is analysed."""
        stream = [hostile_messages()["10 MB message"], shop_error("orders", "split", T0 + 50, None)]
        run = run_stream(tansu, tmp_path, stream)
        assert run["dlq"] == {0: "too_large"}
        assert [d["cluster"]["server"] for d in run["outputs"]] == ["orders"]
        assert run["committed"] == {0: len(stream)}


class TestFingerprintFlood:
    def test_distinct_fingerprints_never_exceed_the_open_burst_cap(
            self, settings_factory: SettingsFactory, kafka_io: KafkaIO, tmp_path: Path) -> None:
        """2,000 events with 2,000 distinct signatures in one go (OTLP batches of 100 records, each twice the
        cap): open bursts never pass max_open=50, the oldest are evicted, and every one is still published.
        What matters is the ratio to the cap (40 caps of signatures), not the absolute count."""
        total, per_message, cap = 2_000, 100, 50
        settings = settings_factory(partitions=1, window={"quiet_s": 0.5, "max_open": cap},
                                    pipeline={"max_inflight": 4, "queue_size": 64, "resume_at": 16})
        messages = []
        for start in range(0, total, per_message):
            records: list[dict[str, Any]] = [{
                "timeUnixNano": str(int((T0 + (start + i) * 0.001) * 1e9)), "severityText": "ERROR",
                "body": {"stringValue": f"handler {word(start + i)} refused the request"},
                "attributes": [{"key": "exception.type", "value": {"stringValue": "HandlerError"}},
                               {"key": "exception.message",
                                "value": {"stringValue": f"handler {word(start + i)} refused"}}],
            } for i in range(per_message)]
            messages.append(orjson.dumps({"resourceLogs": [{
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "flood"}}]},
                "scopeLogs": [{"logRecords": records}]}]}))
        metrics = Metrics()
        service = Service(settings, HeuristicAnalyzer(RepoSync(RepoConfig(cache_dir=tmp_path / "cache"))),
                          metrics)
        open_seen: list[float] = []

        def observe() -> None:
            open_seen.append(metrics.registry.get_sample_value("logagent_open_bursts") or 0.0)

        async def scenario() -> None:
            await kafka_io.produce(settings.kafka.input_topic, messages)
            await run_observed(service, lambda: service.stats.published == total and service.idle(), observe, 120)

        asyncio.run(scenario())
        sample = metrics.registry.get_sample_value
        assert max(open_seen) <= cap and max(open_seen) > 0
        assert (sample("logagent_bursts_closed_total", {"reason": "evicted"}) or 0) >= total - 2 * cap
        assert service.stats.bursts_closed == total == service.stats.published
