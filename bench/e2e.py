"""End to end through a real tansu broker: the Service with the heuristic analyzer on the sample repos.

The sample services' stream (all four shapes, OTLP batches, malformed messages) is produced to a fresh
input topic for each repetition. The contenders read it in turns, each timed in CPU seconds of this
process from its first consumed message to its last (for Log Agent: to the end of the turn of its loop
that counted the last record into its window, which through the repartition topic comes after the last
input message):
- Log Agent: the real `Service` (decode, redaction, fingerprint, window; one heuristic analysis per
  burst published to the output topic), consuming with its own group. By default every message goes
  through the repartition topic (issue #18): it is consumed and produced twice in the process, so the
  line also times the service with `input.keyed_by_server` (the input is keyed by server), which reads
  each message once as the peer does;
- the peer: bare aiokafka consuming the same messages and producing each one to another topic, the
  least any consume-and-produce service costs;
- the hop's bound: bare aiokafka consuming them, producing each with a header set like the key stage's
  (10 headers, ~300 bytes) in whole batches, uncompressed, to a topic of as many partitions, and
  consuming those again on the same consumer, as the service does: the least any repartitioning service
  costs, so the service's figure through the repartition topic can be read against it;
- the Python floor loop in the same consumer: bare aiokafka consuming them and putting each through
  `bench.grouping.run_python_floor`'s loop (decode, read eight fields, count in a dict), the least any
  Python service that reads its events costs. It runs about as fast as the peer, so the target asks of
  Log Agent's whole path about 0.4x of merely decoding each event;
- a consume-and-produce written the usual way, one `send` per message (as aiokafka's documentation shows),
  for what a user would compare Log Agent with, not for the target;
- and, for scale, bare aiokafka only consuming them.
The broker runs in a process of its own, so its CPU counts for neither. Log Agent is also timed from its
first message until every analysis is published (the bursts close after the quiet time; git runs in
child processes, whose CPU is added), and the time from each burst's close to its analysis on the
output topic (the record's broker timestamp) is measured over all repetitions, and how long after the
last record reached the window, past the quiet time, the last burst closed (the input then idle).
Target: Log Agent at least 0.4x the peer's events per CPU second, first message to last.
"""

from __future__ import annotations

import asyncio
import gc
import resource
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from analysis.code.burst import burst_id
from analysis.code.repo import RepoConfig, RepoSpec, RepoSync
from bench.grouping import FLOOR_FIELDS
from bench.stats import Latency, latency
from bench.timing import Timing, ratio
from consumer.explainer import HeuristicAnalyzer
from consumer.metrics import Metrics
from consumer.pipeline import Service
from consumer.runner import configure_gc
from consumer.settings import Settings
from consumer.window import ClosedBurst
from demo.broker import EmbeddedBroker, create_topics
from demo.run import DEMO_IN_APP_PREFIXES, demo_settings
from demo.services import build_sample_repos
from demo.stream import build_stream

TARGET = 0.4
# A consumer joins its group in about a second instead of 5-18 s (tansu); the run itself is not timed.
_FAST_GROUP = {"session_timeout_ms": 1000, "heartbeat_interval_ms": 200, "rebalance_timeout_ms": 1000}
_POLL_S = 0.005
_PARTITIONS = 3


class _TimedService(Service):
    """The real Service, noting the wall time at which each burst closed, and the CPU time of this process
    (and the wall time) when it took its first message and at the end of the last turn of its loop that
    counted records into its window: through the repartition topic those are records read back, after the
    last input message (instrumentation only, none of it per message: a CPU clock read costs ~0.7 us)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.closed_at: dict[str, list[float]] = defaultdict(list)
        self.first_cpu = self.last_cpu = 0.0
        self.last_counted_at = 0.0
        self._counted = 0
        read = self._reader.read_sightings

        def first_read(*args: Any, **kwargs: Any) -> Any:
            self.first_cpu = time.process_time()
            self._reader.read_sightings = read  # type: ignore[method-assign]  # once is enough
            return read(*args, **kwargs)

        self._reader.read_sightings = first_read  # type: ignore[method-assign]

    def _apply_backpressure(self, consumer: Any) -> None:  # once per turn of the loop, after its records
        if self.stats.records_in != self._counted:
            self._counted = self.stats.records_in
            self.last_cpu = time.process_time()
            self.last_counted_at = time.time()
        super()._apply_backpressure(consumer)

    def _enqueue(self, closed: ClosedBurst) -> None:
        self.closed_at[burst_id(closed.cluster)].append(time.time())
        super()._enqueue(closed)


@dataclass(frozen=True)
class E2eResult:
    """CPU seconds of both contenders per repetition and the close-to-output latency of Log Agent."""

    events: int
    logagent: Timing
    keyed: Timing
    bare: Timing
    logagent_drained: Timing
    consume_only: Timing
    bound: Timing
    """The least any repartitioning service costs (`bare_repartition`)."""
    floor: Timing
    """The Python floor loop in the same consumer (`bare_consume_floor`)."""
    usual: Timing
    """A consume-and-produce written the usual way, one `send` per message (`bare_consume_produce`)."""
    bursts: int
    close_to_output: Latency
    idle_close: tuple[float, ...]
    """Per repetition, seconds from the last record counted to the last burst's close, past the quiet time."""

    def line(self) -> str:
        """One-line summary."""
        to_bare, keyed = ratio(self.logagent, self.bare), ratio(self.keyed, self.bare)
        bound = ratio(self.bound, self.bare)
        verdict, keyed_verdict = ("met" if r.median >= TARGET else "NOT met" for r in (to_bare, keyed))
        return (f"e2e: {self.logagent.rate_text(self.events)} per CPU second = {to_bare.text()} bare aiokafka "
                f"consume-and-produce ({self.bare.rate_text(self.events)}; turns {to_bare.spread()}) "
                f"[target >= {TARGET}x: {verdict}]; its bound, bare aiokafka through a repartition topic "
                f"(10 headers, batches) {self.bound.rate_text(self.events)} = {bound.text()} (turns {bound.spread()}), "
                f"Log Agent = {ratio(self.logagent, self.bound).text()} of it; keyed by server (no repartition hop) "
                f"{self.keyed.rate_text(self.events)} = {keyed.text()} (turns {keyed.spread()}) "
                f"[target >= {TARGET}x: {keyed_verdict}]; the Python floor loop in the same consumer "
                f"{self.floor.rate_text(self.events)} = {ratio(self.floor, self.bare).text()} the peer (turns "
                f"{ratio(self.floor, self.bare).spread()}), Log Agent keyed = {ratio(self.keyed, self.floor).text()} "
                f"of it; a consume-and-produce written the usual way (one send per message) "
                f"{self.usual.rate_text(self.events)} = {ratio(self.usual, self.bare).text()} the peer, Log Agent "
                f"keyed = {ratio(self.keyed, self.usual).text()} of it "
                f"(turns {ratio(self.keyed, self.usual).spread()}); "
                f"until every analysis is out "
                f"{self.logagent_drained.rate_text(self.events)} per CPU second = "
                f"{ratio(self.logagent_drained, self.bare).text()}; bare consume alone "
                f"{self.consume_only.rate_text(self.events)} = {ratio(self.logagent, self.consume_only).text()}; "
                f"burst close->output p50 "
                f"{self.close_to_output.p50_ms:.0f} ms p99 {self.close_to_output.p99_ms:.0f} ms ({self.bursts} "
                f"bursts; {self.events} events, {len(self.logagent.seconds)} repetitions in turns); idle input: "
                f"last burst closed {statistics.median(self.idle_close) * 1000:.0f} ms (least "
                f"{min(self.idle_close) * 1000:.0f}, most {max(self.idle_close) * 1000:.0f}) past the quiet time after "
                f"the last record")


async def produce(bootstrap: str, topic: str, messages: Sequence[tuple[bytes | None, bytes]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks="all",
                                max_request_size=2_000_000)
    await producer.start()
    try:
        deliveries = [await producer.send(topic, value=value, key=key) for key, value in messages]
        await asyncio.gather(*deliveries)
    finally:
        await producer.stop()


def _group_consumer(bootstrap: str, group: str, *topics: str) -> AIOKafkaConsumer:
    """A bare contender's consumer: from the start of `topics`, with the settings the service's consumer
    has where they differ from aiokafka's defaults (no auto-commit, read_committed)."""
    return AIOKafkaConsumer(*topics, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                            enable_auto_commit=False, isolation_level="read_committed", **_FAST_GROUP)


async def bare_consume_produce(bootstrap: str, topic: str, out_topic: str | None, group: str,
                               expected: int, one_by_one: bool = False) -> float:
    """CPU seconds for a plain group consumer to read the topic from the start and produce every message
    to `out_topic` (None: only read), from its first message to the last delivery acknowledged. It
    produces the cheapest way aiokafka offers: whole batches (`create_batch`, `send_batch`); `one_by_one`,
    the way its documentation shows and most services do, one `send` per message."""
    # The acks the service's producers use; no compression, which only the service's forwards pay.
    consumer = _group_consumer(bootstrap, group, topic)
    # Batches of up to 1 MB, not aiokafka's default 16 kB: a few large requests, the peer at its fastest.
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=2_000_000,
                                max_batch_size=1_000_000)
    await asyncio.gather(consumer.start(), producer.start())
    try:
        seen = 0
        started = 0.0
        deliveries = []
        while seen < expected:
            for records in (await consumer.getmany(timeout_ms=200, max_records=500)).values():
                if records and not started:
                    started = time.process_time()
                seen += len(records)
                if out_topic is None:
                    continue
                if one_by_one:
                    deliveries += [await producer.send(out_topic, value=record.value, key=record.key, partition=0)
                                   for record in records]
                    continue
                batch = producer.create_batch()
                for record in records:
                    while batch.append(key=record.key, value=record.value, timestamp=None) is None:
                        deliveries.append(await producer.send_batch(batch, out_topic, partition=0))
                        batch = producer.create_batch()
                deliveries.append(await producer.send_batch(batch, out_topic, partition=0))
        await asyncio.gather(*deliveries)
        return time.process_time() - started
    finally:
        await asyncio.gather(consumer.stop(), producer.stop())


async def bare_consume_floor(bootstrap: str, topic: str, group: str, expected: int) -> float:
    """CPU seconds for a plain group consumer to read the topic from the start and put each message through
    the Python floor loop (`run_python_floor`'s: decode, read eight fields, count in a dict; a message it
    cannot read so is skipped), from its first message to its last."""
    consumer = _group_consumer(bootstrap, group, topic)
    await consumer.start()
    try:
        seen = 0
        started = 0.0
        loads, counts = orjson.loads, dict[tuple[Any, ...], int]()
        while seen < expected:
            for records in (await consumer.getmany(timeout_ms=200, max_records=500)).values():
                if records and not started:
                    started = time.process_time()
                seen += len(records)
                for record in records:
                    try:
                        get = loads(record.value).get
                        key = tuple([get(field) for field in FLOOR_FIELDS])[:3]
                        counts[key] = counts.get(key, 0) + 1
                    except (orjson.JSONDecodeError, AttributeError, TypeError):  # not JSON, not an object, a list
                        continue
        return time.process_time() - started
    finally:
        await consumer.stop()


_KEY_HEADERS = [("fingerprint", b"f424070f9c937842e64496e3cf681af0"), ("server", b"checkout-service"),
                ("tenant", b"acme"), ("exception_type", b"java.lang.NullPointerException")]


def _bound_headers(record: Any) -> list[tuple[str, bytes]]:
    """Headers the shape and size of a forward's, made without reading the message."""
    stamp = str(record.timestamp / 1000).encode()
    return [*_KEY_HEADERS, ("events", b"[[0," + stamp + b',"8d64db8cfd7d94f657446221beb0d96a7cbad642","couponCode"]]'),
            ("source_topic", record.topic.encode()), ("source_partition", str(record.partition).encode()),
            ("source_offset", str(record.offset).encode()), ("group", b"0"), ("source_time", stamp)]


async def bare_repartition(bootstrap: str, topic: str, hop_topic: str, group: str, expected: int) -> float:
    """CPU seconds for bare aiokafka to read `topic` from the start, produce every message with a header set
    like a forward's to the same partition of `hop_topic` (whole batches, one per partition and fetch) and
    read those back on the same consumer, from its first message to the last read back."""
    consumer = _group_consumer(bootstrap, group, topic, hop_topic)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=2_000_000,
                                max_batch_size=1_000_000)
    await asyncio.gather(consumer.start(), producer.start())
    try:
        read_back = 0
        started = 0.0
        while read_back < expected:
            for tp, records in (await consumer.getmany(timeout_ms=200, max_records=500)).items():
                if tp.topic == hop_topic:
                    read_back += len(records)
                    continue
                if records and not started:
                    started = time.process_time()
                batch = producer.create_batch()
                for record in records:
                    while batch.append(key=record.key, value=record.value, timestamp=None,
                                       headers=_bound_headers(record)) is None:
                        await producer.send_batch(batch, hop_topic, partition=tp.partition)
                        batch = producer.create_batch()
                await producer.send_batch(batch, hop_topic, partition=tp.partition)
        return time.process_time() - started
    finally:
        await asyncio.gather(consumer.stop(), producer.stop())


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


@dataclass
class _Bench:
    """What every repetition shares: the broker, the settings, the sample repos and their stream."""

    bootstrap: str
    settings: Settings
    repos: RepoConfig
    messages: list[tuple[bytes | None, bytes]]


async def run_service(bench: _Bench, rep: int, keyed: bool = False) -> tuple[float, float, list[float], float]:
    """The Service over repetition `rep`'s topic: CPU seconds from its first consumed message to its last
    and to its last analysis published (child processes included), each burst's close->output delay, and
    the seconds past the quiet time from its last record counted to its last burst's close.
    `keyed`: with `input.keyed_by_server`, no repartition topic."""
    suffix = "-keyed" if keyed else ""
    kafka = bench.settings.kafka.model_copy(update={
        "input_topic": f"errors-{rep}", "output_topic": f"analyses{suffix}-{rep}",
        "dlq_topic": f"errors.dlq{suffix}-{rep}", "group_id": f"logagent{suffix}-{rep}", **_FAST_GROUP})
    source = bench.settings.input.model_copy(update={"keyed_by_server": keyed})
    settings = bench.settings.model_copy(update={"kafka": kafka, "input": source})
    analyzer = HeuristicAnalyzer(RepoSync(bench.repos), in_app_prefixes=DEMO_IN_APP_PREFIXES)
    service = _TimedService(settings, analyzer, Metrics())
    stop = asyncio.Event()
    children = _children_cpu_s()
    task = asyncio.create_task(service.run(stop))
    try:
        await wait_consumed(service, task, len(bench.messages))
        await wait_drained(service, task)  # every record counted, every analysis out
        cpu_s = service.last_cpu - service.first_cpu
        drained_s = time.process_time() - service.first_cpu + _children_cpu_s() - children
    finally:
        stop.set()
        await task
    outputs: dict[str, list[float]] = defaultdict(list)
    for stamp, data in await read_outputs(bench.bootstrap, kafka.output_topic):
        outputs[data["analysis_id"]].append(stamp)
    delays = [out - closed for key, closes in service.closed_at.items()
              for closed, out in zip(closes, outputs.get(key, []), strict=False)]
    last_close = max(at for closes in service.closed_at.values() for at in closes)
    return cpu_s, drained_s, delays, last_close - service.last_counted_at - settings.window.quiet_s


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def measure(events: int, repetitions: int) -> E2eResult:
    """Both contenders on the same messages, `repetitions` times in turns, each repetition on a new topic."""
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp, EmbeddedBroker() as broker:
        workdir = Path(tmp)
        settings = demo_settings(Settings(), broker.bootstrap_servers, workdir)
        samples = build_sample_repos(workdir / "samples")
        stream = build_stream(samples, events, seed=7, max_message_bytes=settings.input.max_message_bytes)
        specs = {server: RepoSpec(url=sample.repo.resolve().as_uri()) for server, sample in samples.items()}
        bench = _Bench(broker.bootstrap_servers, settings, RepoConfig(cache_dir=workdir / "cache", servers=specs),
                       [(m.key, m.value) for m in stream.messages])
        ours: list[float] = []
        keyed: list[float] = []
        drained: list[float] = []
        bare: list[float] = []
        consume_only: list[float] = []
        bound: list[float] = []
        floor: list[float] = []
        usual: list[float] = []
        delays: list[float] = []
        idle_close: list[float] = []
        for rep in range(repetitions):
            topics = [f"errors-{rep}", f"analyses-{rep}", f"errors.dlq-{rep}", f"bare-out-{rep}",
                      f"analyses-keyed-{rep}", f"errors.dlq-keyed-{rep}", f"bound-hop-{rep}", f"usual-out-{rep}"]
            await create_topics(bench.bootstrap, topics, {topics[0]: _PARTITIONS, topics[6]: _PARTITIONS})
            await produce(bench.bootstrap, topics[0], bench.messages)
            order = ["service", "keyed", "bare", "bound", "floor", "consume", "usual"]
            for contender in order[rep % len(order):] + order[:rep % len(order)]:
                gc.collect()  # as `bench.timing.cpu_seconds`: no contender pays for the garbage of the one before
                if contender == "keyed":
                    keyed.append((await run_service(bench, rep, keyed=True))[0])
                elif contender == "service":
                    cpu_s, drained_s, burst_delays, idle_s = await run_service(bench, rep)
                    ours.append(cpu_s)
                    drained.append(drained_s)
                    delays += burst_delays
                    idle_close.append(idle_s)
                elif contender == "floor":
                    floor.append(await bare_consume_floor(bench.bootstrap, topics[0], f"floor-{rep}",
                                                          len(bench.messages)))
                elif contender == "usual":
                    usual.append(await bare_consume_produce(bench.bootstrap, topics[0], topics[7], f"usual-{rep}",
                                                            len(bench.messages), one_by_one=True))
                elif contender == "bound":
                    bound.append(await bare_repartition(bench.bootstrap, topics[0], topics[6], f"bound-{rep}",
                                                        len(bench.messages)))
                else:
                    out = topics[3] if contender == "bare" else None
                    seconds = await bare_consume_produce(bench.bootstrap, topics[0], out, f"{contender}-{rep}",
                                                         len(bench.messages))
                    (bare if contender == "bare" else consume_only).append(seconds)
    return E2eResult(stream.event_count, Timing(tuple(ours)), Timing(tuple(keyed)), Timing(tuple(bare)),
                     Timing(tuple(drained)), Timing(tuple(consume_only)), Timing(tuple(bound)), Timing(tuple(floor)),
                     Timing(tuple(usual)), len(delays),
                     latency(delays),
                     tuple(idle_close))


async def wait_consumed(service: Service, task: asyncio.Task[None], total: int, timeout_s: float = 300.0) -> None:
    """Until the service has read `total` messages since it started."""
    deadline = time.monotonic() + timeout_s
    while service.stats.events_in < total:
        _alive(task, deadline, f"{service.stats.events_in} of {total} messages consumed")
        await asyncio.sleep(_POLL_S)


async def run_rounds(service: Service, bootstrap: str, topic: str, messages: Sequence[tuple[bytes | None, bytes]],
                     rounds: int) -> None:
    """Run `service` over `rounds` productions of `messages`, each drained before the next is produced."""
    await produce(bootstrap, topic, messages)
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    try:
        for round_no in range(1, rounds + 1):
            if round_no > 1:
                await produce(bootstrap, topic, messages)
            await wait_consumed(service, task, round_no * len(messages))
            await wait_drained(service, task)
    finally:
        stop.set()
        await task


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
    """Quick: 5k events, 3 repetitions; full: 40k events, 5 repetitions."""
    configure_gc()  # as `logagent run` does (and every contender runs under it alike)
    return asyncio.run(measure(5_000 if quick else 40_000, 3 if quick else 5)).line()
