"""`logagent demo`: the whole flow on an embedded broker and sample repositories, then a readable summary.

It starts tansu on a free loopback port, creates the topics, builds the sample services' git repos,
produces their error stream, runs the real `Service` until the stream is drained, reads what came out,
and stops everything it started (the broker too, on error and Ctrl-C). Each stage is reported as it
ends (`demo.report`); `--keep DIR` leaves the repositories, event files and memory behind.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from analysis.code.repo import RepoConfig, RepoSpec, RepoSync
from analysis.intake.decode import DecodeConfig, decode_message
from analysis.report import Analysis
from consumer.explainer import Explainer, build_explainer
from consumer.metrics import Metrics
from consumer.pipeline import Service, ServiceStats
from consumer.settings import Settings
from demo.broker import EmbeddedBroker, create_topics
from demo.report import (
    ConsoleProgress,
    Progress,
    QuietProgress,
    analyses_line,
    broker_line,
    bursts,
    consumed_line,
    dlq_line,
    kept_lines,
    produced_line,
    repos_line,
    summarize,
    timed_out_line,
)
from demo.services import SampleService, build_sample_repos
from demo.stream import SampleStream, build_stream

__all__ = ["DEMO_IN_APP_PREFIXES", "DemoResult", "demo_settings", "execute_demo", "run_demo", "summarize",
           "write_events"]

DEMO_IN_APP_PREFIXES = ("com.acme", "github.com/acme", "orders")
"""The sample services' own code, as an operator would configure it."""
_INPUT_PARTITIONS = 3
_DEMO_MAX_MESSAGE_BYTES = 65_536  # small, so the oversized sample message stays cheap to produce
_DEMO_GROUP_TIMINGS = {"session_timeout_ms": 3_000, "heartbeat_interval_ms": 1_000, "rebalance_timeout_ms": 3_000}


@dataclass(frozen=True, slots=True)
class DemoResult:
    """Everything one demo run produced, for the summary and for tests."""

    services: Mapping[str, SampleService]
    stream: SampleStream
    analyses: tuple[Analysis, ...]
    dlq_reasons: tuple[str, ...]
    stats: ServiceStats
    drained: bool
    """The service caught up and analysed every burst before the timeout."""
    elapsed_s: float
    bootstrap_servers: str
    broker_pid: int | None


def demo_settings(settings: Settings, bootstrap_servers: str, data_dir: Path) -> Settings:
    """`settings` pointed at the embedded broker, with windows short enough for a demo and a group that
    joins in 2 s: tansu holds a join for half the session timeout (5 s at the default), and the demo's one
    consumer has nobody to wait for. The session still outlasts a busy turn of a loaded machine's loop."""
    return settings.model_copy(update={
        "data_dir": data_dir,
        "kafka": settings.kafka.model_copy(update={
            "bootstrap_servers": bootstrap_servers, "group_id": "logagent-demo",
            "security_protocol": "PLAINTEXT", "sasl_mechanism": None, "commit_interval_s": 0.5,
            "enable_idempotence": False,
            **_DEMO_GROUP_TIMINGS,
        }),
        "window": settings.window.model_copy(update={"quiet_s": 1.5, "max_length_s": 120.0}),
        "input": settings.input.model_copy(update={
            "max_message_bytes": _DEMO_MAX_MESSAGE_BYTES, "in_app_prefixes": list(DEMO_IN_APP_PREFIXES),
        }),
        "pipeline": settings.pipeline.model_copy(update={"poll_timeout_ms": 100}),
        "memory": settings.memory.model_copy(update={"uri": str(data_dir / "memory")}),
    })


def make_analyzer(settings: Settings, repos: RepoConfig, metrics: Metrics) -> Explainer:
    """The service's explainer on the sample repositories: LLM when Ollama is configured, with memory."""
    return build_explainer(settings, metrics, RepoSync(repos))


async def execute_demo(
    settings: Settings, workdir: Path, *, events: int = 3_000, seed: int = 7, timeout_s: float = 120.0,
    progress: Progress | None = None, keep: Path | None = None,
) -> DemoResult:
    """Run the demo in `workdir` (repos, clones, memory; an absolute path) and return what happened; the
    broker is stopped on return. `progress` hears of each stage. `keep` (workdir as the user named it,
    for display) also writes the event files `write_events` makes."""
    progress = progress or QuietProgress()
    started = time.monotonic()
    with EmbeddedBroker() as broker:
        progress.stage(broker_line(broker.bootstrap_servers))
        settings = demo_settings(settings, broker.bootstrap_servers, workdir)
        kafka = settings.kafka
        # The repartition topic as the service would make it: as many partitions as the input.
        repartition = settings.repartition.topic_for(kafka.group_id)
        topics = [kafka.input_topic, kafka.output_topic, kafka.dlq_topic, kafka.review_topic,
                  kafka.feedback_topic, repartition]
        await create_topics(broker.bootstrap_servers, topics,
                            {kafka.input_topic: _INPUT_PARTITIONS, repartition: _INPUT_PARTITIONS})
        services = build_sample_repos(workdir / "samples")
        progress.stage(repos_line(services, keep / "samples" if keep is not None else None))
        stream = build_stream(services, events, seed, settings.input.max_message_bytes)
        if keep is not None:
            write_events(workdir, stream)
        await _produce(broker.bootstrap_servers, kafka.input_topic, stream)
        progress.stage(produced_line(stream))
        repos = RepoConfig(cache_dir=workdir / "cache", servers={
            server_id: RepoSpec(url=service.repo.resolve().as_uri())
            for server_id, service in services.items()
        })
        metrics = Metrics()
        explainer = make_analyzer(settings, repos, metrics)
        service = Service(settings, explainer, metrics)
        consuming = time.monotonic()
        drained = await _run_until_drained(service, len(stream.messages), timeout_s, progress)
        progress.stage(consumed_line(service.stats.events_in, time.monotonic() - consuming, drained))
        analyses = [Analysis.model_validate(orjson.loads(value)["data"])
                    for _, value in await _read_topic(broker.bootstrap_servers, kafka.output_topic)]
        dlq = [headers.get("reason", "") for headers, _ in await _read_topic(broker.bootstrap_servers,
                                                                              kafka.dlq_topic)]
        progress.stage(analyses_line(analyses))
        progress.stage(dlq_line(dlq))
        pid = broker.pid
    return DemoResult(services, stream, tuple(analyses), tuple(dlq), service.stats, drained,
                      time.monotonic() - started, broker.bootstrap_servers, pid)


def write_events(workdir: Path, stream: SampleStream) -> dict[str, Path]:
    """`events.jsonl` (every well-formed message, in produce order) and, under `events/`, one event per bug
    named `<server>--<bug>.json` (a native one where there is one), and per message-only burst
    (`<server>--noise-<name>.json`), for `logagent fingerprint|analyze`."""
    folder = workdir / "events"
    folder.mkdir(parents=True, exist_ok=True)
    valid = [m for m in stream.messages if m.kind != "malformed"]
    (workdir / "events.jsonl").write_bytes(b"".join(m.value + b"\n" for m in valid))
    files: dict[str, Path] = {}
    for message in sorted(valid, key=lambda m: m.shape != "native"):
        name = f"{decode_message(message.value, DecodeConfig())[0].server_id}--{message.bug.replace(':', '-')}"
        if name not in files:
            files[name] = folder / f"{name}.json"
            files[name].write_bytes(message.value + b"\n")
    return files


async def _produce(bootstrap_servers: str, topic: str, stream: SampleStream) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=20, acks="all")
    await producer.start()
    try:
        deliveries = [await producer.send(topic, value=m.value, key=m.key) for m in stream.messages]
        await asyncio.gather(*deliveries)
    finally:
        await producer.stop()


async def _run_until_drained(service: Service, messages: int, timeout_s: float, progress: Progress) -> bool:
    """Run the service until it read every message and has nothing open or in flight (or time runs out)."""
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    deadline = time.monotonic() + timeout_s
    drained = False
    try:
        while not task.done() and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            progress.consuming(service.stats.events_in, messages, service.stats.published)
            if service.stats.events_in >= messages and service.idle():
                drained = True
                break
    finally:
        stop.set()
        await task  # a crashed service raises here, loudly
    return drained


async def _read_topic(bootstrap_servers: str, topic: str) -> list[tuple[dict[str, str], bytes]]:
    """Every record of `topic` (all partitions, from the start): its headers and value."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        if not partitions:
            return []
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        end = await consumer.end_offsets(partitions)
        records: list[tuple[dict[str, str], bytes]] = []
        while [tp for tp in partitions if await consumer.position(tp) < end[tp]]:
            batch = await consumer.getmany(timeout_ms=500)
            for messages in batch.values():
                for m in messages:
                    headers = {k: v.decode("utf-8", "replace") for k, v in (m.headers or ())}
                    records.append((headers, m.value or b""))
        return records
    finally:
        await consumer.stop()


async def _interruptible(work: Coroutine[Any, Any, DemoResult]) -> DemoResult:
    """`work`, then Ctrl-C honoured even if something on the way swallowed its cancellation (aiokafka's
    shutdown suppresses CancelledError; Python 3.11's wait_for can drop one that races a result): the
    cancellation still counts on the task, and asyncio.run turns it into KeyboardInterrupt."""
    result = await work
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
    return result


def run_demo(
    settings: Settings, *, events: int = 3_000, seed: int = 7, timeout_s: float = 120.0,
    out: TextIO | None = None, keep: Path | None = None,
) -> int:
    """`logagent demo`: run, reporting each stage, then print the bursts; 0 when the stream was fully
    analysed, 1 when the timeout came first (one line on stderr says so), 130 on Ctrl-C (after saying so,
    with everything stopped)."""
    out = out or sys.stdout
    progress = ConsoleProgress(out)
    print("Log Agent demo", file=out, flush=True)
    try:
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            # Absolute: the sample programs run in their own directories.
            result = asyncio.run(_interruptible(execute_demo(settings, keep.resolve(), events=events, seed=seed,
                                                             timeout_s=timeout_s, progress=progress, keep=keep)))
        else:
            with tempfile.TemporaryDirectory(prefix="logagent-demo-") as tmp:
                result = asyncio.run(_interruptible(execute_demo(settings, Path(tmp), events=events, seed=seed,
                                                                 timeout_s=timeout_s, progress=progress)))
    except KeyboardInterrupt:
        progress.close()
        kept = (f"; what was built so far is in {keep} (remove it, or keep another directory, to run again)"
                if keep is not None else "")
        print(f"logagent: demo interrupted (Ctrl-C): the service and the broker are stopped{kept}", file=sys.stderr)
        return 130
    finally:
        progress.close()
    lines = ["", *bursts(result.analyses)]
    if keep is not None:
        lines += kept_lines(keep, _event_files(keep))
    print("\n".join(lines), file=out)
    if result.drained:
        return 0
    stats = result.stats
    print(f"logagent: {timed_out_line(stats.events_in, len(result.stream.messages), stats.published, timeout_s)}",
          file=sys.stderr)
    return 1


def _event_files(keep: Path) -> dict[str, Path]:
    return {path.stem: path for path in sorted((keep / "events").glob("*.json"))}
