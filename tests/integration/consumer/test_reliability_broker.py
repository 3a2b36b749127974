"""Broker restart under a running service: tansu is stopped and a new one starts on the same port.

tansu keeps everything in memory, so the new broker has no topics, no offsets and no group: the operator
recreates the topics, and the running service (never restarted) must reconnect, publish the analysis it
was holding when the broker went away, and process the new topics from their first offset.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest

from analysis.code.repo import RepoSync
from analysis.event import Cluster
from analysis.report import Analysis
from consumer import kafka as consumer_kafka
from consumer import key_stage
from consumer.explainer import HeuristicAnalyzer
from consumer.metrics import Metrics
from consumer.pipeline import Service
from consumer.settings import Settings
from demo.broker import EmbeddedBroker, create_topics
from tests.conftest import KafkaIO, ShopRepos, make_settings, shop_error
from tests.ports import free_port

pytestmark = pytest.mark.integration

T0 = 1_740_000_000.0


@dataclass
class DelayedAnalyzer:
    """The real heuristic analyzer behind a per-server delay: a slow analysis spanning the broker outage."""

    inner: HeuristicAnalyzer
    delays: dict[str, float]
    started: list[str] = field(default_factory=list)

    async def analyze(self, cluster: Cluster) -> Analysis:
        self.started.append(cluster.server_id)
        await asyncio.sleep(self.delays.get(cluster.server_id, 0.0))
        return await self.inner.analyze(cluster)


@pytest.fixture
def own_broker() -> Iterator[EmbeddedBroker]:
    """A broker this test may stop and replace (the session broker stays untouched)."""
    broker = EmbeddedBroker(port=free_port())
    broker.start()
    yield broker
    broker.stop()


def repartition_topic(settings: Settings) -> str:
    return settings.repartition.topic_for(settings.kafka.group_id)


def _burst(server: str, function: str, start: float, commit: str, size: int) -> list[bytes]:
    return [shop_error(server, function, start + i * 0.05, commit, n=i) for i in range(size)]


async def _until(condition: Callable[[], bool], timeout_s: float, what: str, task: asyncio.Task[None]) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert not task.done(), f"the service stopped by itself while waiting for {what}"
        assert time.monotonic() < deadline, f"{what} not reached in {timeout_s}s"
        await asyncio.sleep(0.05)


class TestBrokerRestart:
    def test_the_running_service_reconnects_publishes_held_work_and_reads_the_new_topics(
            self, own_broker: EmbeddedBroker, tmp_path: Path, shop_repos: Callable[..., ShopRepos]) -> None:
        """While burst X is still being analysed, later work is committed only up to X's first offset; the
        broker is then replaced (topics and offsets lost, same port). Without restarting, the service
        publishes X on the recreated output topic and processes a new burst from offset 0 of the recreated
        input topic: nothing skipped by stale positions, offsets committed to the new end."""
        repos = shop_repos("orders", "billing")
        # A quiet time of 1 s: Z's twelve records reach the recreated topic in more than one batch when the
        # machine is loaded, and a 0.3 s gap between two closed Z at 3 of 12 once.
        settings = make_settings(own_broker.bootstrap_servers, tmp_path / "data", partitions=1,
                                 window={"quiet_s": 1.0},
                                 pipeline={"retry_attempts": 200, "retry_initial_s": 0.1, "retry_max_s": 0.5})
        kafka = settings.kafka
        analyzer = DelayedAnalyzer(HeuristicAnalyzer(RepoSync(repos.config)), {"billing": 4.0})
        service = Service(settings, analyzer, Metrics())
        io = KafkaIO(own_broker.bootstrap_servers)
        w = _burst("orders", "total", T0, repos.commits["orders"], 3)  # offsets 0-2, fast
        x = _burst("billing", "split", T0 + 10, repos.commits["billing"], 3)  # input offsets 3-5, slow
        y = _burst("orders", "parse_qty", T0 + 20, repos.commits["orders"], 3)  # offsets 6-8, fast
        z = _burst("orders", "split", T0 + 100, repos.commits["orders"], 12)  # new broker, offsets 0-11
        committed_during: dict[int, int | None] = {}
        x_first = -1  # X's first offset in the repartition topic, where watermark records sit between bursts
        outage_s = 0.0

        async def scenario() -> None:
            nonlocal committed_during, outage_s, x_first
            stop = asyncio.Event()
            task = asyncio.create_task(service.run(stop))
            try:
                for burst in (w, x, y):
                    await io.produce(kafka.input_topic, burst)
                    await asyncio.sleep(0.5)  # bursts close one after the other, in offset order
                await _until(lambda: service.stats.published >= 2, 15, "W and Y published", task)
                await asyncio.sleep(2 * kafka.commit_interval_s)
                assert analyzer.started.count("billing") == 1 and service.stats.published == 2
                # The bursts hold the repartition topic (one partition; its watermark records between them).
                repartition = settings.repartition.topic_for(kafka.group_id)
                committed_during = await io.committed(kafka.group_id, repartition)
                held = [(r.offset, r.key) for r in await io.read_all(repartition) if r.key]  # marks interleave
                x_first = min(offset for offset, key in held if b'"billing"' in key)

                stopped = time.monotonic()
                own_broker.stop()
                await asyncio.sleep(0.5)
                own_broker.start()  # same host and port, empty memory storage
                await create_topics(own_broker.bootstrap_servers,
                                    [kafka.input_topic, kafka.output_topic, kafka.dlq_topic],
                                    {kafka.input_topic: 1})
                outage_s = time.monotonic() - stopped
                await _until(lambda: service.stats.published >= 3, 30, "X published after the restart", task)
                await io.produce(kafka.input_topic, z)
                await _until(lambda: service.stats.published >= 4 and service.idle(), 30, "Z published", task)
                await asyncio.sleep(2 * kafka.commit_interval_s)
            finally:
                stop.set()
                await asyncio.wait_for(task, 30)

        asyncio.run(scenario())
        assert x_first >= 3 and committed_during == {0: x_first}, "committed past W, never past the unpublished X"
        data = [orjson.loads(r.value)["data"] for r in asyncio.run(io.read_all(kafka.output_topic))]
        published = sorted((d["cluster"]["server"], d["cluster"]["exception_type"], d["cluster"]["count"])
                           for d in data)
        assert published == [("billing", "ZeroDivisionError", 3), ("orders", "ZeroDivisionError", 12)]
        assert asyncio.run(io.committed(kafka.group_id, kafka.input_topic)) == {0: len(z)}
        assert outage_s < 10
        # Nothing is committed past a recreated log's end, so a restart neither resets nor publishes again.
        for topic in (kafka.input_topic, repartition_topic(settings)):
            ends, committed = asyncio.run(io.end_offsets(topic)), asyncio.run(io.committed(kafka.group_id, topic))
            assert all(offset is None or offset <= ends[partition] for partition, offset in committed.items()), \
                (topic, committed, ends)
        again = Service(settings, HeuristicAnalyzer(RepoSync(repos.config)), Metrics())

        async def restart() -> None:
            stop = asyncio.Event()
            task = asyncio.create_task(again.run(stop))
            await asyncio.sleep(3 * kafka.commit_interval_s + settings.window.quiet_s)
            stop.set()
            await asyncio.wait_for(task, 30)

        asyncio.run(restart())
        assert again.stats.published == 0 and len(asyncio.run(io.read_all(kafka.output_topic))) == len(data)



class TestStopDuringOutage:
    def test_sigterm_with_the_broker_gone_stops_within_the_grace_period(
            self, own_broker: EmbeddedBroker, tmp_path: Path, shop_repos: Callable[..., ShopRepos],
            monkeypatch: pytest.MonkeyPatch) -> None:
        """The broker goes away for good after the service forwarded and windowed a stream; its bursts close
        and their analyses cannot be published. Stopping then still returns in bounded time: the producers'
        flush, the forwards' acknowledgements, the commit and the consumer's stop are each capped, where
        aiokafka would retry every batch for 40 s per producer. The commit and stop caps are shortened (the
        same code waits on them), so the bound below is far under an uncapped flush."""
        monkeypatch.setattr(consumer_kafka, "COMMIT_WAIT_S", 2.0)
        monkeypatch.setattr(consumer_kafka, "STOP_WAIT_S", 2.0)
        monkeypatch.setattr(key_stage, "SETTLE_WAIT_S", 2.0)
        repos = shop_repos("orders", "billing")
        settings = make_settings(own_broker.bootstrap_servers, tmp_path / "data", partitions=4,
                                 window={"quiet_s": 0.3}, pipeline={"shutdown_grace_s": 1.0})
        service = Service(settings, HeuristicAnalyzer(RepoSync(repos.config)), Metrics())
        io = KafkaIO(own_broker.bootstrap_servers)
        stream = [raw for i in range(40) for raw in (
            shop_error("orders", "total", T0 + i * 0.01, repos.commits["orders"], n=i),
            shop_error("billing", "split", T0 + i * 0.01, repos.commits["billing"], n=i))]
        took = 0.0

        async def scenario() -> None:
            nonlocal took
            stop = asyncio.Event()
            task = asyncio.create_task(service.run(stop))
            try:
                await _until(lambda: len(service.assigned) == 8, 30, "the assignment", task)
                await io.produce(settings.kafka.input_topic, stream)
                await _until(lambda: service.stats.records_in >= len(stream), 30, "the stream windowed", task)
                own_broker.stop()
                await asyncio.sleep(1.0)  # the bursts close; their analyses wait on the broker
            finally:
                started = time.monotonic()
                stop.set()
                await asyncio.wait_for(task, 60)
                took = time.monotonic() - started

        asyncio.run(scenario())
        # At most: a commit under way when stop came, the grace for analyses (1 s here), the forwards'
        # acknowledgements, the final commit, the clients' stops (together); unbounded, the producers flush
        # for 40 s each and a commit never returns.
        bound = (2 * consumer_kafka.COMMIT_WAIT_S + settings.pipeline.shutdown_grace_s + key_stage.SETTLE_WAIT_S
                 + consumer_kafka.STOP_WAIT_S)
        assert took < bound + 3, f"stopping took {took:.1f}s (bound {bound:.0f}s)"
