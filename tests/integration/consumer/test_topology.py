"""Three replicas on unkeyed input over 12 partitions: every burst reaches one owner whole.

The input is spread round-robin, as log shippers do by default, so each burst's events land on several
partitions owned by different replicas. The key stage of whichever replica reads an event forwards it to
the repartition topic keyed by (server, fingerprint); the window stage of that partition's owner counts
the burst whole. Each round of bursts is produced once the previous round is counted, so the test never
depends on how fast one replica reads compared with another; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from analysis.code.burst import analysis_id
from analysis.code.repo import RepoSync
from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.signature import fingerprint_event
from consumer.explainer import HeuristicAnalyzer
from consumer.metrics import Metrics
from consumer.pipeline import Service
from consumer.settings import Settings
from demo.broker import EmbeddedBroker
from tests.conftest import SHOP_BUGS, KafkaIO, ShopRepos, make_settings, shop_error

pytestmark = pytest.mark.integration

T0 = 1_760_000_000.0
PARTITIONS = 12
REPLICAS = 3
SERVERS = tuple(f"svc-{i:02d}" for i in range(10))
ROUNDS = 7  # 10 servers x 3 failures x 7 rounds = 210 bursts
SIZE = 4  # events per burst
# Rounds are 100 s apart in event time and in broker time (as if produced live), so each round's bursts
# close once every partition has been read into the next round; only the last round closes by quiet time
# in wall time, once every partition is read to its end.
QUIET_S = 2.0


def round_stream(repos: ShopRepos, r: int, servers: tuple[str, ...] = SERVERS) -> list[bytes]:
    """Round `r`: every (server, failure) fails SIZE times, the servers' events interleaved in time."""
    events = [(T0 + r * 100 + i * 0.05 + s * 0.001 + f * 0.0001, server, function, i)
              for i in range(SIZE) for s, server in enumerate(servers) for f, function in enumerate(SHOP_BUGS)]
    return [shop_error(server, function, ts, repos.commits[server], n=i)
            for ts, server, function, i in sorted(events)]


def start_replicas(base: Settings, repos: ShopRepos, count: int,
                   services: list[Service]) -> tuple[list[asyncio.Event], list[asyncio.Task[None]]]:
    """Start `count` replicas of one group (appended to `services`); their stop events and tasks."""
    stops, tasks = [], []
    for index in range(count):
        settings = base.model_copy(update={
            "kafka": base.kafka.model_copy(update={"client_id": f"logagent-{index}"}),
            "data_dir": base.data_dir / f"replica-{index}"})
        services.append(Service(settings, HeuristicAnalyzer(RepoSync(repos.config)), Metrics()))
        stops.append(asyncio.Event())
        tasks.append(asyncio.create_task(services[-1].run(stops[-1])))
    return stops, tasks


async def stop_replicas(stops: list[asyncio.Event], tasks: list[asyncio.Task[None]]) -> None:
    for stop in stops:
        stop.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 30)


def burst_id(first: bytes) -> str:
    """The analysis id of the burst `first` opens, from the real decoder and fingerprint."""
    (event,) = decode_message(first, DecodeConfig())
    return analysis_id(event.server_id, event.tenant, fingerprint_event(event).fingerprint, event.timestamp)


class TestUnkeyedInputAcrossReplicas:
    def test_each_burst_is_published_once_whole_by_one_replica(
            self, tansu: EmbeddedBroker, tmp_path: Path, shop_repos: Callable[..., ShopRepos]) -> None:
        """210 bursts, each spread over several of 12 partitions: 210 analyses, each with its 4 events."""
        repos = shop_repos(*SERVERS)
        # Steady membership is what this test is about: on a loaded machine the suite's 1 s sessions expire,
        # members are dropped and replay (at least once, the same ids: the kill+add bench and the crash
        # tests cover that), so sessions here outlast a busy second.
        steady = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500, "rebalance_timeout_ms": 3000}
        base = make_settings(tansu.bootstrap_servers, tmp_path / "data", partitions=PARTITIONS, kafka=steady,
                             window={"quiet_s": QUIET_S}, pipeline={"max_inflight": 2, "queue_size": 256})
        kafka = base.kafka
        io = KafkaIO(tansu.bootstrap_servers)
        rounds = [round_stream(repos, r) for r in range(ROUNDS)]
        expected = {burst_id(raw) for stream in rounds for raw in stream[:len(SERVERS) * len(SHOP_BUGS)]}
        assert len(expected) == len(SERVERS) * len(SHOP_BUGS) * ROUNDS
        replicas: list[Service] = []

        async def wait(condition: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
            deadline = time.monotonic() + timeout_s
            while not condition():
                assert time.monotonic() < deadline, f"{what} not reached; stats {[r.stats for r in replicas]}"
                await asyncio.sleep(0.05)

        def counted() -> int:
            return sum(r.stats.records_in for r in replicas)

        async def scenario() -> None:
            stops, tasks = start_replicas(base, repos, REPLICAS, replicas)
            try:
                # Both topics' partitions shared out (12 input + 12 repartition), every replica with some.
                await wait(lambda: sum(len(r.assigned) for r in replicas) == 2 * PARTITIONS
                           and all(r.assigned for r in replicas), "a stable assignment", 45)
                forwarded = 0
                for r, stream in enumerate(rounds):
                    # Unkeyed: round-robin over the partitions, as a shipper without a key sends.
                    for p in range(PARTITIONS):
                        await io.produce(kafka.input_topic, stream[p::PARTITIONS], partition=p,
                                         timestamp_ms=int((T0 + r * 100) * 1000))
                    forwarded += len(stream)
                    await wait(functools.partial(lambda f: counted() >= f, forwarded), f"round {r} counted")
                await wait(lambda: sum(r.stats.published for r in replicas) >= len(expected)
                           and all(r.idle() for r in replicas), "every burst published")
                # The counters can reach the total with a burst published twice while another is still on its
                # way (in flight between the stages, idle as far as the last fetch showed): wait for the topic.
                deadline = time.monotonic() + 30
                while not expected <= {d["analysis_id"] for d in await read_outputs()}:
                    assert time.monotonic() < deadline, f"bursts never published; stats {[r.stats for r in replicas]}"
                    await asyncio.sleep(0.5)
            finally:
                await stop_replicas(stops, tasks)

        async def read_outputs() -> list[dict[str, Any]]:
            return [orjson.loads(r.value)["data"] for r in await io.read_all(kafka.output_topic)]

        asyncio.run(scenario())
        outputs = asyncio.run(read_outputs())
        published = Counter(str(d["analysis_id"]) for d in outputs)
        split = {d["analysis_id"]: (d["cluster"]["server"], d["cluster"]["first_seen"], d["cluster"]["count"])
                 for d in outputs if d["analysis_id"] not in expected}
        twice = [i for i, n in published.items() if n > 1]
        counts = Counter(d["cluster"]["count"] for d in outputs)
        assert set(published) == expected, (f"bursts split (unexpected ids {split}) or lost "
                                            f"({len(expected - set(published))} missing, published twice: {twice}, "
                                            f"counts {counts}, stats {[r.stats for r in replicas]})")
        assert len(outputs) == len(expected), f"published twice: {twice}"
        assert set(counts) == {SIZE}, f"an event counted twice or missed: counts {counts}"
        assert all(r.stats.published > 0 for r in replicas), "every replica analysed part of the stream"
        assert sum(r.stats.replays_skipped for r in replicas) == 0
        committed = asyncio.run(io.committed(kafka.group_id, kafka.input_topic))
        assert committed == asyncio.run(io.end_offsets(kafka.input_topic)), "the input committed to its end"


class TestBacklogReadUnkeyed:
    """The whole stream is in Kafka before any replica starts (after an outage, or on first deploy), spread
    round-robin over 4 partitions: each replica reads its partitions at its own pace, far apart in event
    time, and every burst must still come out whole, once."""

    @pytest.mark.parametrize(("replicas", "live"), [(1, False), (2, True)], ids=["1-replica-bulk", "2-replicas-live"])
    def test_every_burst_of_a_backlog_is_published_once_whole(
            self, tansu: EmbeddedBroker, tmp_path: Path, shop_repos: Callable[..., ShopRepos], replicas: int,
            live: bool) -> None:
        """5 rounds of 15 bursts of 4 events, 100 s apart, as a backlog on 4 partitions: 75 analyses. Its
        broker timestamps are those of a live stream (the rounds 100 s apart) or of a bulk import (all now)."""
        partitions, servers, rounds_made = 4, SERVERS[:5], 5
        repos = shop_repos(*servers)
        steady = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500, "rebalance_timeout_ms": 3000}
        base = make_settings(tansu.bootstrap_servers, tmp_path / "data", partitions=partitions, kafka=steady,
                             window={"quiet_s": QUIET_S}, pipeline={"max_inflight": 2, "queue_size": 256})
        kafka = base.kafka
        io = KafkaIO(tansu.bootstrap_servers)
        rounds = [round_stream(repos, r, servers) for r in range(rounds_made)]
        expected = {burst_id(raw) for stream in rounds for raw in stream[:len(servers) * len(SHOP_BUGS)]}
        assert len(expected) == len(servers) * len(SHOP_BUGS) * rounds_made
        services: list[Service] = []

        async def scenario() -> None:
            for r, stream in enumerate(rounds):
                for p in range(partitions):
                    await io.produce(kafka.input_topic, stream[p::partitions], partition=p,
                                     timestamp_ms=int((T0 + r * 100) * 1000) if live else None)
            stops, tasks = start_replicas(base, repos, replicas, services)
            try:
                deadline = time.monotonic() + 60
                while not (sum(s.stats.published for s in services) >= len(expected)
                           and all(s.idle() for s in services)):
                    assert time.monotonic() < deadline, f"not every burst published: {[s.stats for s in services]}"
                    await asyncio.sleep(0.05)
            finally:
                await stop_replicas(stops, tasks)

        asyncio.run(scenario())
        outputs = [orjson.loads(r.value)["data"] for r in asyncio.run(io.read_all(kafka.output_topic))]
        spans = sorted((d["cluster"]["server"], d["cluster"]["fingerprint"], d["cluster"]["first_seen"],
                        d["cluster"]["count"]) for d in outputs if d["analysis_id"] not in expected)
        assert {d["analysis_id"] for d in outputs} == expected, f"bursts split or merged: {spans[:10]}"
        assert len(outputs) == len(expected), "a burst published twice"
        assert {d["cluster"]["count"] for d in outputs} == {SIZE}, "an event counted twice or missed"


class _StalledReplica:
    """A replica on a thread and event loop of its own, so that its loop can really stall while the others
    run on: a machine too busy to give it the CPU."""

    _loop: asyncio.AbstractEventLoop
    _stop: asyncio.Event

    def __init__(self, service: Service) -> None:
        self.service = service
        self._started = threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._run(),))
        self._thread.start()
        assert self._started.wait(10), "the replica's loop did not start"

    async def _run(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        self._started.set()
        await self.service.run(self._stop)

    def stall(self, seconds: float) -> None:
        """Block its loop for `seconds` from now: nothing of it runs, answers to its fetches included."""
        self._loop.call_soon_threadsafe(time.sleep, seconds)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        assert not self._thread.is_alive(), "the replica did not stop"


class TestAStalledKeyStage:
    def test_a_burst_waits_for_the_forwards_of_a_stalled_replica(
            self, tansu: EmbeddedBroker, tmp_path: Path, shop_repos: Callable[..., ShopRepos]) -> None:
        """Two replicas on two unkeyed partitions; as the second round of 9 bursts arrives, one replica
        stalls for 2 s (four times the quiet time), its last marks saying it has read its partition to its
        end. The other replica's window waits for the stalled one's forwards: 18 analyses, each whole."""
        partitions, servers = 2, SERVERS[:3]  # 9 events at each instant: a burst's events alternate partitions
        repos = shop_repos(*servers)
        # Sessions outlast the stall: the stalled replica stays a member.
        steady = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500, "rebalance_timeout_ms": 3000}
        base = make_settings(tansu.bootstrap_servers, tmp_path / "data", partitions=partitions, kafka=steady)
        kafka = base.kafka
        io = KafkaIO(tansu.bootstrap_servers)
        rounds = [round_stream(repos, r, servers) for r in range(2)]
        expected = {burst_id(raw) for stream in rounds for raw in stream[:len(servers) * len(SHOP_BUGS)]}
        other = base.model_copy(update={"kafka": kafka.model_copy(update={"client_id": "logagent-stalled"}),
                                        "data_dir": base.data_dir / "stalled"})
        stalled = _StalledReplica(Service(other, HeuristicAnalyzer(RepoSync(repos.config)), Metrics()))
        replicas = [stalled.service]

        async def wait(condition: Callable[[], bool], what: str) -> None:
            deadline = time.monotonic() + 30
            while not condition():
                assert time.monotonic() < deadline, f"{what} not reached; stats {[r.stats for r in replicas]}"
                await asyncio.sleep(0.05)

        def published(at_least: int) -> Callable[[], bool]:
            # Of the stalled replica (another thread) only counters: `idle` iterates what its loop changes.
            return lambda: sum(r.stats.published for r in replicas) >= at_least and replicas[1].idle()

        async def scenario() -> None:
            stops, tasks = start_replicas(base, repos, 1, replicas)
            try:
                await wait(lambda: all(len(r.assigned) == partitions for r in replicas), "a stable assignment")
                for r, stream in enumerate(rounds):
                    if r:
                        stalled.stall(2.0)
                    for p in range(partitions):
                        await io.produce(kafka.input_topic, stream[p::partitions], partition=p,
                                         timestamp_ms=int((T0 + r * 100) * 1000))
                    await wait(published((r + 1) * len(expected) // 2), f"round {r} published")
            finally:
                await stop_replicas(stops, tasks)

        try:
            asyncio.run(scenario())
        finally:
            stalled.stop()
        outputs = [orjson.loads(r.value)["data"] for r in asyncio.run(io.read_all(kafka.output_topic))]
        split = sorted((d["cluster"]["server"], d["cluster"]["first_seen"], d["cluster"]["count"])
                       for d in outputs if d["analysis_id"] not in expected)
        assert {d["analysis_id"] for d in outputs} == expected, f"bursts split: {split}"
        assert len(outputs) == len(expected) and {d["cluster"]["count"] for d in outputs} == {SIZE}
