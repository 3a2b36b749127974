"""Shared fixtures: a real tansu broker, uniquely named topics, test-friendly Settings, Kafka I/O helpers."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from analysis.code.repo import RepoConfig, RepoSpec
from analysis.intake.redact import KINDS, _prefilter
from consumer.logs import configure_logging
from consumer.pipeline import Service
from consumer.settings import (
    InputSettings,
    KafkaSettings,
    PipelineSettings,
    RepartitionSettings,
    Settings,
    WindowSettings,
)
from demo.broker import EmbeddedBroker, create_topics
from store import OnnxEmbedder
from tests.gitrepo import GitRepo
from tests.ports import free_port

_ROOT = Path(__file__).resolve().parents[1]


def pytest_sessionstart(session: pytest.Session) -> None:
    """The default redaction prefilter is compiled before the first test: until it is, every rule reads each
    short text (`analysis.intake.redact`), and a test's time would count a compile it did not ask for."""
    _prefilter(KINDS)[1].wait()


@contextlib.contextmanager
def ecs_logs(level: str, redact: Callable[[object], object], **service: str) -> Iterator[io.StringIO]:
    """The root logger writing ECS lines into a buffer through `configure_logging`, as `logagent run` does;
    its handlers and level restored after by `setLevel`, which also forgets which loggers were enabled at
    `level` (restored by assignment, aiokafka went on logging at DEBUG through the worker's later tests:
    135 MB of lines in a memory test, a new-user trial found)."""
    buffer = io.StringIO()
    root = logging.getLogger()
    handlers, before = root.handlers[:], root.level
    configure_logging(level, redact, buffer, service=service or None)
    try:
        yield buffer
    finally:
        root.handlers[:] = handlers
        root.setLevel(before)


def tool(name: str) -> str:
    """A command-line tool of the tests (helm, promtool) from `.tools/bin` or PATH; fails if absent."""
    local = _ROOT / ".tools" / "bin" / name
    found = str(local) if local.exists() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found in .tools/bin or on PATH: run `make tools`")
    return found


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[str]:
    """A real S3 API (moto_server) on a free loopback port for the session; yields its endpoint URL."""
    port = free_port()
    server = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1",
                               "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, "moto_server exited"
                assert time.monotonic() < deadline, "moto_server did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


def create_bucket(endpoint: str, name: str) -> None:
    """An empty bucket on the test S3 endpoint."""
    import boto3  # only the S3 tests need it

    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                 region_name="us-east-1").create_bucket(Bucket=name)


@pytest.fixture(scope="session")
def private_keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Real private key files of every format the redactor hides, generated once per session (tests.keys)."""
    from tests.keys import generate_keys  # tests.keys needs `tool` from this module

    return generate_keys(tmp_path_factory.mktemp("keys"))


@pytest.fixture(scope="session")
def embedder() -> OnnxEmbedder:
    """The real offline embedder, loaded and warmed once for the session."""
    model = OnnxEmbedder()
    model.embed(["warm up"])
    return model


SECRETS = {
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "github": "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
           "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "url_password": "hunter2pass",
    "email": "jane.doe@example.com",
    "card": "4111 1111 1111 1111",
}
"""Secrets and personal data the agent and explainer tests plant; none may reach the model or the output."""


# Tansu holds each group join for about half the session timeout: short timeouts keep tests fast.
FAST_GROUP_TIMINGS: dict[str, Any] = {
    "session_timeout_ms": 1000,
    "heartbeat_interval_ms": 200,
    "rebalance_timeout_ms": 1000,
}


@pytest.fixture(scope="session")
def tansu() -> Iterator[EmbeddedBroker]:
    """One tansu broker (in-memory, free loopback port) for the whole session; tests use their own topics."""
    with EmbeddedBroker(port=free_port()) as broker:
        yield broker


TopicFactory = Callable[..., str]


@pytest.fixture
def topic_factory(tansu: EmbeddedBroker) -> TopicFactory:
    """Create a uniquely named topic: `topic_factory("errors", partitions=2) -> name`."""

    def create(prefix: str = "topic", partitions: int = 1) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        asyncio.run(create_topics(tansu.bootstrap_servers, [name], partitions))
        return name

    return create


SettingsFactory = Callable[..., Settings]


def live_stamps(values: Sequence[bytes]) -> list[int]:
    """The broker timestamps (ms) `values` (native-shape events) would have had if produced as they
    happened: each event's own time. A test that loads a long stream at once and expects its bursts to
    close while it is read stamps it so; loaded at once unstamped, bursts close only once it is all read."""
    return [int(orjson.loads(value)["timestamp"] * 1000) for value in values]


def make_settings(
    bootstrap_servers: str,
    data_dir: Path,
    partitions: int = 2,
    like: Settings | None = None,
    kafka: Mapping[str, Any] | None = None,
    window: Mapping[str, Any] | None = None,
    pipeline: Mapping[str, Any] | None = None,
    input: Mapping[str, Any] | None = None,
    repartition: Mapping[str, Any] | None = None,
) -> Settings:
    """Settings on a test broker with fresh topics and group, fast timings and short windows.

    `kafka={...}`, `window={...}`, `pipeline={...}`, `input={...}`, `repartition={...}` override fields
    per group;
    `like=other` reuses another Settings' topics and group id (a restarted service).
    """
    if like is not None:
        names = like.kafka.model_dump(include={"input_topic", "output_topic", "dlq_topic", "group_id"})
    else:
        names = {
            "input_topic": f"errors-{uuid.uuid4().hex[:10]}",
            "output_topic": f"analyses-{uuid.uuid4().hex[:10]}",
            "dlq_topic": f"dlq-{uuid.uuid4().hex[:10]}",
            "group_id": f"logagent-{uuid.uuid4().hex[:8]}",
        }
        topics = [names["input_topic"], names["output_topic"], names["dlq_topic"]]
        asyncio.run(create_topics(bootstrap_servers, topics, {names["input_topic"]: partitions}))
    kafka_settings = KafkaSettings(**{
        "bootstrap_servers": bootstrap_servers, "commit_interval_s": 0.2, "fetch_max_wait_ms": 100,
        **FAST_GROUP_TIMINGS, **names,
        **(kafka or {}),
    })
    window_settings = WindowSettings(
        **{"quiet_s": 0.5, "max_length_s": 60.0, "max_open": 1000, "max_samples": 5, **(window or {})}
    )
    pipeline_settings = PipelineSettings(**{
        "max_inflight": 2, "queue_size": 64, "resume_at": 16, "poll_timeout_ms": 100,
        "shutdown_grace_s": 5.0, "retry_initial_s": 0.05, "retry_max_s": 0.2, **(pipeline or {}),
    })
    repartition_settings = RepartitionSettings(**{"linger_ms": 2, "watermark_interval_ms": 100,
                                                  **(repartition or {})})
    return Settings(data_dir=data_dir, kafka=kafka_settings, window=window_settings,
                    pipeline=pipeline_settings, input=InputSettings(**(input or {})),
                    repartition=repartition_settings)


def service_env(settings: Settings, repos_file: Path) -> dict[str, str]:
    """The LOGAGENT_* environment of `logagent run` for `settings` (what a Helm chart would set)."""
    kafka, window, pipeline = settings.kafka, settings.window, settings.pipeline
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGAGENT_")}
    env.update({
        "LOGAGENT_DATA_DIR": str(settings.data_dir),
        "LOGAGENT_REPOS_FILE": str(repos_file),
        "LOGAGENT_LOG_LEVEL": "INFO",
        "LOGAGENT_HTTP__HOST": "127.0.0.1",
        "LOGAGENT_HTTP__PORT": "0",
        "LOGAGENT_KAFKA__BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "LOGAGENT_KAFKA__INPUT_TOPIC": kafka.input_topic,
        "LOGAGENT_KAFKA__OUTPUT_TOPIC": kafka.output_topic,
        "LOGAGENT_KAFKA__DLQ_TOPIC": kafka.dlq_topic,
        "LOGAGENT_KAFKA__GROUP_ID": kafka.group_id,
        "LOGAGENT_KAFKA__SESSION_TIMEOUT_MS": str(kafka.session_timeout_ms),
        "LOGAGENT_KAFKA__HEARTBEAT_INTERVAL_MS": str(kafka.heartbeat_interval_ms),
        "LOGAGENT_KAFKA__REBALANCE_TIMEOUT_MS": str(kafka.rebalance_timeout_ms),
        "LOGAGENT_KAFKA__COMMIT_INTERVAL_S": str(kafka.commit_interval_s),
        "LOGAGENT_KAFKA__FETCH_MAX_WAIT_MS": str(kafka.fetch_max_wait_ms),
        "LOGAGENT_WINDOW__QUIET_S": str(window.quiet_s),
        "LOGAGENT_WINDOW__MAX_LENGTH_S": str(window.max_length_s),
        "LOGAGENT_PIPELINE__MAX_INFLIGHT": str(pipeline.max_inflight),
        "LOGAGENT_PIPELINE__POLL_TIMEOUT_MS": str(pipeline.poll_timeout_ms),
        "LOGAGENT_PIPELINE__SHUTDOWN_GRACE_S": str(pipeline.shutdown_grace_s),
        "LOGAGENT_REPARTITION__WATERMARK_INTERVAL_MS": str(settings.repartition.watermark_interval_ms),
    })
    return env


@pytest.fixture
def settings_factory(tansu: EmbeddedBroker, tmp_path: Path) -> SettingsFactory:
    """`make_settings` on the session broker: `settings_factory(partitions=2, window={"quiet_s": 1})`."""

    def make(**overrides: Any) -> Settings:
        return make_settings(tansu.bootstrap_servers, tmp_path / "data", **overrides)

    return make


@dataclass(frozen=True)
class Record:
    """One record read back from a topic."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: dict[str, bytes]


class KafkaIO:
    """Produce to and read back from topics of the test broker, and read a group's committed offsets."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers

    async def produce(self, topic: str, values: Sequence[bytes], keys: Sequence[bytes | None] | None = None,
                      partition: int | None = None, timestamp_ms: int | Sequence[int] | None = None) -> None:
        """Send `values` in order (optionally keyed, or all to one partition) and wait for every ack. Each
        has the broker timestamp `timestamp_ms` (one for all, or one per value), else now: a stream
        produced live has its events' times, one loaded at once has now."""
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap_servers, acks="all", linger_ms=5)
        await producer.start()
        try:
            futures = [
                await producer.send(topic, value=value, key=keys[i] if keys else None, partition=partition,
                                    timestamp_ms=timestamp_ms if not isinstance(timestamp_ms, Sequence)
                                    else timestamp_ms[i])
                for i, value in enumerate(values)
            ]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    async def _partitions(self, consumer: AIOKafkaConsumer, topic: str) -> list[TopicPartition]:
        for _ in range(50):
            partitions = consumer.partitions_for_topic(topic)
            if partitions:
                return [TopicPartition(topic, p) for p in sorted(partitions)]
            await consumer.topics()  # refreshes metadata
            await asyncio.sleep(0.1)
        raise AssertionError(f"topic {topic} has no partitions")

    async def topics(self) -> set[str]:
        """Every topic the broker has (asked without naming one, which would create it on tansu)."""
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap_servers)
        await consumer.start()
        try:
            return set(await consumer.topics())
        finally:
            await consumer.stop()

    async def read_all(self, topic: str) -> list[Record]:
        """Every record currently in `topic`, read without a group."""
        return (await self._read(topic))[1]

    async def _read(self, topic: str, timeout_s: float = 20.0) -> tuple[list[int], list[Record]]:
        """The partitions of `topic` and every record currently in it.

        The end is the high watermark of fetch responses: tansu's ListOffsets answers the last batch's
        base offset + 1 instead of the log end, so `end_offsets` cannot be trusted here. This consumer
        starts after the call, so once its position reaches the watermark of its own fetches, every record
        that was there is read. The broker answers an empty fetch at once and each poll is short: an empty
        topic reads in tens of milliseconds, not in one 500 ms fetch wait and a 200 ms poll.
        """
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap_servers, enable_auto_commit=False,
                                    fetch_max_wait_ms=10)
        await consumer.start()
        try:
            tps = await self._partitions(consumer, topic)
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            records: list[Record] = []
            deadline = asyncio.get_running_loop().time() + timeout_s
            while True:
                batch = await consumer.getmany(timeout_ms=20)
                for tp, messages in batch.items():
                    records += [
                        Record(tp.partition, m.offset, m.key, m.value, dict(m.headers)) for m in messages
                    ]
                behind = [tp for tp in tps if await self._behind(consumer, tp)]
                if not behind:
                    return [tp.partition for tp in tps], records
                if asyncio.get_running_loop().time() > deadline:
                    raise AssertionError(f"could not read {topic} to its end: {behind}")
        finally:
            await consumer.stop()

    @staticmethod
    async def _behind(consumer: AIOKafkaConsumer, tp: TopicPartition) -> bool:
        highwater = consumer.highwater(tp)
        return highwater is None or bool(await consumer.position(tp) < highwater)

    async def end_offsets(self, topic: str) -> dict[int, int]:
        """The log end offset of each partition of `topic` (0 for an empty one)."""
        partitions, records = await self._read(topic)
        ends = dict.fromkeys(partitions, 0)
        for record in records:
            ends[record.partition] = max(ends[record.partition], record.offset + 1)
        return ends

    async def committed(self, group_id: str, topic: str) -> dict[int, int | None]:
        """The group's committed offset per partition (via the consumer API: tansu lacks the admin one)."""
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap_servers, group_id=group_id,
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            tps = await self._partitions(consumer, topic)
            return {tp.partition: await consumer.committed(tp) for tp in tps}
        finally:
            await consumer.stop()


@pytest.fixture
def kafka_io(tansu: EmbeddedBroker) -> KafkaIO:
    """Produce/read/committed helpers on the session broker."""
    return KafkaIO(tansu.bootstrap_servers)


SHOP_PY = """\
def total(order):
    return order["price"] * order["qty"]  # BUG total


def parse_qty(text):
    return int(text)  # BUG parse_qty


def split(amount, parts):
    return amount / parts  # BUG split
"""
"""A tiny service with three real bugs: a missing key, a bad integer, a division by zero."""

SHOP_BUGS: dict[str, tuple[str, str, str]] = {
    "total": ("KeyError", "'price'", "BUG total"),
    "parse_qty": ("ValueError", "invalid literal for int() with base 10: 'x{n}'", "BUG parse_qty"),
    "split": ("ZeroDivisionError", "division by zero", "BUG split"),
}
"""function -> (exception type, message template, marker of the raising line in SHOP_PY)."""


def shop_line(marker: str) -> int:
    """1-based line of `marker` in SHOP_PY."""
    return next(i for i, line in enumerate(SHOP_PY.splitlines(), 1) if marker in line)


@dataclass(frozen=True)
class ShopRepos:
    """One real repository per server, all with SHOP_PY at `commits[server]`."""

    config: RepoConfig
    commits: dict[str, str]


@pytest.fixture
def shop_repos(tmp_path: Path) -> Callable[..., ShopRepos]:
    """Build real git repositories (one per server id) holding the shop service: `shop_repos("a", "b")`."""

    def build(*servers: str) -> ShopRepos:
        commits: dict[str, str] = {}
        specs: dict[str, RepoSpec] = {}
        for server in servers:
            repo = GitRepo(tmp_path / "origin" / server)
            repo.commit("initial", {"README.md": f"{server}\n"})
            commits[server] = repo.commit("shop service", {"app/__init__.py": "", "app/shop.py": SHOP_PY})
            specs[server] = RepoSpec(url=str(repo.path))
        return ShopRepos(RepoConfig(cache_dir=tmp_path / "cache", servers=specs), commits)

    return build


def shop_error(server: str, function: str, ts: float, commit: str | None, n: int = 0) -> bytes:
    """A native-shape error event raised by `function` of SHOP_PY, as a service would log it."""
    exc_type, template, marker = SHOP_BUGS[function]
    message = template.format(n=n)
    frames = [  # caller first, as Sentry-style native traces are sent
        {"filename": "app/handler.py", "module": "app.handler", "function": "handle", "lineno": 10 + n % 7,
         "in_app": True},
        {"filename": "app/shop.py", "module": "app.shop", "function": function, "lineno": shop_line(marker),
         "in_app": True},
    ]
    return orjson.dumps({
        "server_id": server, "timestamp": ts, "level": "error", "logger": "app.shop",
        "message": f"{exc_type}: {message}", "commit": commit,
        "exception": {"type": exc_type, "value": message, "stacktrace": frames},
    })


async def run_until(service: Service, done: Callable[[], bool], timeout_s: float = 25.0,
                    stop: asyncio.Event | None = None) -> None:
    """Run `service` until `done()` holds, then stop it and wait for its shutdown; fail after `timeout_s`."""
    stop = stop or asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    deadline = time.monotonic() + timeout_s
    try:
        while not done():
            if task.done():
                task.result()
                raise AssertionError("the service stopped by itself")
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not reached in {timeout_s}s; stats: {service.stats}")
            await asyncio.sleep(0.02)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=30)
