"""End to end through a real tansu broker: the Service with the heuristic analyzer on the sample repos.

The sample services' stream is produced to the input topic; the real `Service` consumes, groups and
publishes one heuristic analysis per burst. Measured: events per second from the first message
consumed to the last, and the time from each burst's close to its event on the output topic (the
record's broker timestamp). The stream is replayed for several rounds (after each drain) so there are
enough bursts for a p99. The peer is the floor: bare aiokafka consuming the same messages. Rates are
measured on the first round, which is entirely in the topic before either consumer starts.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from analysis.code.localiser import analysis_id
from analysis.code.repo import RepoConfig, RepoSpec, RepoSync
from bench.stats import Latency, latency
from consumer.explainer import HeuristicAnalyzer
from consumer.metrics import Metrics
from consumer.pipeline import Service
from consumer.settings import Settings
from consumer.window import ClosedBurst
from demo.broker import EmbeddedBroker, create_topics
from demo.run import DEMO_IN_APP_PREFIXES, demo_settings
from demo.services import build_sample_repos
from demo.stream import build_stream

_PARTITIONS = 3


class _TimedService(Service):
    """The real Service, noting the wall time at which each burst closed (instrumentation only)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.closed_at: dict[str, list[float]] = defaultdict(list)

    def _enqueue(self, closed: ClosedBurst) -> None:
        cluster = closed.cluster
        self.closed_at[analysis_id(cluster.server_id, cluster.fingerprint, cluster.first_seen)].append(
            time.time())
        super()._enqueue(closed)


@dataclass(frozen=True)
class E2eResult:
    """Throughput of both sides and the close-to-output latency of Log Agent."""

    events: int
    bursts: int
    logagent_rate: float
    kafka_rate: float
    close_to_output: Latency

    def line(self) -> str:
        """One-line summary."""
        ratio = self.logagent_rate / self.kafka_rate
        return (f"e2e: {self.logagent_rate / 1000:.1f}k events/s = {ratio:.2f}x "
                f"bare aiokafka consume ({self.kafka_rate / 1000:.1f}k/s); burst close->output p50 "
                f"{self.close_to_output.p50_ms:.0f} ms p99 {self.close_to_output.p99_ms:.0f} ms "
                f"({self.bursts} bursts, {self.events} events)")


async def produce(bootstrap: str, topic: str, messages: Sequence[tuple[bytes | None, bytes]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks="all",
                                max_request_size=2_000_000)
    await producer.start()
    try:
        deliveries = [await producer.send(topic, value=value, key=key) for key, value in messages]
        await asyncio.gather(*deliveries)
    finally:
        await producer.stop()


async def _bare_consume(bootstrap: str, topic: str, expected: int) -> float:
    """Messages per second for a plain group consumer reading the topic from the start."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="bench-bare",
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        seen = 0
        first = 0.0
        while seen < expected:
            batch = await consumer.getmany(timeout_ms=200, max_records=500)
            for records in batch.values():
                if records and not first:
                    first = time.perf_counter()
                seen += len(records)
        return expected / (time.perf_counter() - first)
    finally:
        await consumer.stop()


async def read_outputs(bootstrap: str, topic: str) -> list[tuple[float, dict[str, Any]]]:
    """Every analysis event on `topic`: its broker timestamp (seconds) and its `data`, in offset order."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        end = await consumer.end_offsets(partitions)
        events: list[tuple[float, dict[str, Any]]] = []
        while [tp for tp in partitions if await consumer.position(tp) < end[tp]]:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                events.extend((record.timestamp / 1000, orjson.loads(record.value)["data"]) for record in records)
        return events
    finally:
        await consumer.stop()


async def measure(events: int, rounds: int) -> E2eResult:
    """Produce the sample stream `rounds` times through the Service; then time bare aiokafka on it."""
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp, EmbeddedBroker() as broker:
        workdir = Path(tmp)
        settings = demo_settings(Settings(), broker.bootstrap_servers, workdir)
        kafka = settings.kafka
        topics = [kafka.input_topic, kafka.output_topic, kafka.dlq_topic]
        await create_topics(broker.bootstrap_servers, topics, {kafka.input_topic: _PARTITIONS})
        services = build_sample_repos(workdir / "samples")
        stream = build_stream(services, events, seed=7, max_message_bytes=settings.input.max_message_bytes)
        messages = [(m.key, m.value) for m in stream.messages]
        specs = {server: RepoSpec(url=sample.repo.resolve().as_uri()) for server, sample in services.items()}
        repos = RepoConfig(cache_dir=workdir / "cache", servers=specs)
        analyzer = HeuristicAnalyzer(RepoSync(repos), in_app_prefixes=DEMO_IN_APP_PREFIXES)
        service = _TimedService(settings, analyzer, Metrics())
        # Later rounds only add bursts for the latency percentiles.
        busy_s = await run_rounds(service, broker.bootstrap_servers, kafka.input_topic, messages, rounds)
        outputs: dict[str, list[float]] = defaultdict(list)
        for stamp, data in await read_outputs(broker.bootstrap_servers, kafka.output_topic):
            outputs[data["analysis_id"]].append(stamp)
        kafka_rate = await _bare_consume(broker.bootstrap_servers, kafka.input_topic, len(messages))
    delays = [out - closed for key, closes in service.closed_at.items()
              for closed, out in zip(closes, outputs.get(key, []), strict=False)]
    events_per_message = stream.event_count / len(messages)  # OTLP messages carry several events
    ours = len(messages) / busy_s * events_per_message
    return E2eResult(stream.event_count * rounds, len(delays), ours, kafka_rate * events_per_message,
                     latency(delays))


async def run_rounds(service: Service, bootstrap: str, topic: str, messages: Sequence[tuple[bytes | None, bytes]],
                     rounds: int) -> float:
    """Run `service` over `rounds` productions of `messages`, each drained before the next; returns the
    seconds the first round took to consume. That round is in the topic before the service starts, so
    its rate is consume + process alone."""
    await produce(bootstrap, topic, messages)
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    try:
        busy_s = await consume_round(service, task, len(messages))
        await wait_drained(service, task)
        for round_no in range(2, rounds + 1):
            await produce(bootstrap, topic, messages)
            await consume_round(service, task, round_no * len(messages))
            await wait_drained(service, task)
    finally:
        stop.set()
        await task
    return busy_s


async def consume_round(service: Service, task: asyncio.Task[None], total: int, timeout_s: float = 300.0) -> float:
    """Seconds from this round's first consumed message to its last; 0 when the service had read the
    whole round before this was called (it reads a later round while the round is being produced)."""
    deadline = time.monotonic() + timeout_s
    start_count = service.stats.events_in
    while service.stats.events_in == start_count < total:
        _alive(task, deadline, f"no message consumed ({start_count} read so far)")
        await asyncio.sleep(0.001)
    started = time.perf_counter()
    while service.stats.events_in < total:
        _alive(task, deadline, f"{service.stats.events_in} of {total} messages consumed")
        await asyncio.sleep(0.001)
    return time.perf_counter() - started


async def wait_drained(service: Service, task: asyncio.Task[None], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not service.idle():
        _alive(task, deadline, "the service did not drain the stream")
        await asyncio.sleep(0.05)


def _alive(task: asyncio.Task[None], deadline: float, waiting_for: str) -> None:
    if task.done():
        task.result()  # raises what killed the service
        raise RuntimeError("the service stopped early")
    if time.monotonic() > deadline:
        raise TimeoutError(f"timed out: {waiting_for}")


def bench(quick: bool) -> str:
    """Quick: 5k events, 2 rounds; full: 40k events, 3 rounds."""
    return asyncio.run(measure(5_000 if quick else 40_000, 2 if quick else 3)).line()
