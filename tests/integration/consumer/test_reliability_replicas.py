"""Two replicas in one consumer group sharing one memory on s3:// (moto_server), rebalanced mid-stream.

Replica 1 starts alone; replica 2 joins while replica 1 is consuming (a rebalance), and later replica 1
leaves (another one). Every burst must be published under exactly its own id, every published copy
must count all of the burst's events, and the shared memory must hold each analysis once.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from analysis.code.burst import analysis_id
from analysis.code.repo import RepoSync
from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.signature import fingerprint_event
from consumer.explainer import build_explainer
from consumer.metrics import Metrics
from consumer.pipeline import Service
from consumer.settings import Settings
from demo.broker import EmbeddedBroker
from store import MemoryConfig, MemoryStore, OnnxEmbedder, StorageConfig
from tests.conftest import KafkaIO, ShopRepos, create_bucket, make_settings, shop_error

pytestmark = pytest.mark.integration

T0 = 1_750_000_000.0
BUCKET = "logagent-replicas"
SERVERS = ("alpha", "bravo", "charlie", "delta")
FUNCTIONS = ("total", "parse_qty", "split")


@pytest.fixture(scope="module")
def s3_endpoint(moto_s3: str) -> str:
    """The session's S3 endpoint with this module's empty bucket."""
    create_bucket(moto_s3, BUCKET)
    return moto_s3


def shared_memory(endpoint: str, prefix: str) -> MemoryConfig:
    """The memory both replicas point at, configured as an operator would."""
    storage = StorageConfig(endpoint=endpoint, region="us-east-1", allow_http=True,
                            access_key_id="test", secret_access_key="test")
    return MemoryConfig(uri=f"s3://{BUCKET}/{prefix}", storage=storage)


def replica_settings(base: Settings, memory: MemoryConfig, index: int) -> Settings:
    """Replica `index`: same topics, group and memory; its own client id and local data dir."""
    kafka = base.kafka.model_copy(update={"client_id": f"logagent-{index}"})
    return base.model_copy(update={"kafka": kafka, "memory": memory,
                                   "data_dir": base.data_dir / f"replica-{index}"})


def stream_per_server(repos: ShopRepos, rounds: int, size: int) -> dict[str, list[bytes]]:
    """Per server, its bursts one after the other (each function fails `size` times, rounds apart)."""
    out: dict[str, list[bytes]] = {}
    for s, server in enumerate(SERVERS):
        out[server] = [shop_error(server, function, T0 + r * 100 + f * 10 + s + i * 0.05,
                                  repos.commits[server], n=i)
                       for r in range(rounds) for f, function in enumerate(FUNCTIONS) for i in range(size)]
    return out


def expected_bursts(stream: dict[str, list[bytes]], size: int) -> dict[str, int]:
    """analysis id -> events, computed with the real decoder and fingerprint from each burst's first event."""
    ids: dict[str, int] = {}
    for raws in stream.values():
        for first in raws[::size]:
            (event,) = decode_message(first, DecodeConfig())
            fingerprint = fingerprint_event(event).fingerprint
            ids[analysis_id(event.server_id, event.tenant, fingerprint, event.timestamp)] = size
    return ids


class TestReplicasSharingMemory:
    def test_a_rebalance_mid_stream_loses_no_burst_and_analyses_each_once(
            self, tansu: EmbeddedBroker, tmp_path: Path, s3_endpoint: str,
            shop_repos: Callable[..., ShopRepos]) -> None:
        """Replica 2 joins while replica 1 consumes, then replica 1 leaves: every burst is published under
        its own id with all its events, and the shared s3:// memory holds each analysis exactly once."""
        repos = shop_repos(*SERVERS)
        size, rounds = 4, 4
        stream = stream_per_server(repos, rounds, size)
        expected = expected_bursts(stream, size)
        base = make_settings(tansu.bootstrap_servers, tmp_path / "data", partitions=len(SERVERS),
                             window={"quiet_s": 0.5}, pipeline={"max_inflight": 2})
        memory = shared_memory(s3_endpoint, "rebalance")
        replicas: list[Service] = []
        io = KafkaIO(tansu.bootstrap_servers)
        kafka = base.kafka

        def start(index: int) -> tuple[Service, asyncio.Event, asyncio.Task[None]]:
            settings = replica_settings(base, memory, index)
            metrics = Metrics()
            service = Service(settings, build_explainer(settings, metrics, RepoSync(repos.config)), metrics)
            replicas.append(service)
            stop = asyncio.Event()
            return service, stop, asyncio.create_task(service.run(stop))

        async def produce_round(r: int) -> None:
            # Each server on its own partition (the key choice a deployment makes: server id).
            per_round = len(FUNCTIONS) * size
            for p, server in enumerate(SERVERS):
                await io.produce(kafka.input_topic, stream[server][r * per_round:(r + 1) * per_round],
                                 keys=[server.encode()] * per_round, partition=p)

        async def scenario() -> None:
            first, stop_first, task_first = start(1)
            await produce_round(0)
            await wait(lambda: first.stats.published >= 3, "replica 1 publishing")
            await produce_round(1)
            second, stop_second, task_second = start(2)  # joins while replica 1 is consuming
            await wait(lambda: second.stats.published >= 1, "replica 2 publishing")
            await produce_round(2)
            await asyncio.sleep(0.5)
            stop_first.set()  # replica 1 leaves mid-stream: its partitions move to replica 2
            await asyncio.wait_for(task_first, 30)
            await produce_round(3)
            await wait(lambda: published_ids() >= expected.keys() and second.idle(), "drain on replica 2", 60)
            stop_second.set()
            await asyncio.wait_for(task_second, 30)

        outputs: list[dict[str, object]] = []

        def published_ids() -> set[str]:
            return {str(d["analysis_id"]) for d in outputs}

        async def wait(condition: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
            deadline = time.monotonic() + timeout_s
            while not condition():
                assert time.monotonic() < deadline, f"{what} not reached; stats {[r.stats for r in replicas]}"
                outputs[:] = [orjson.loads(r.value)["data"] for r in await io.read_all(kafka.output_topic)]
                await asyncio.sleep(0.3)

        asyncio.run(scenario())
        outputs[:] = [orjson.loads(r.value)["data"] for r in asyncio.run(io.read_all(kafka.output_topic))]
        assert published_ids() == expected.keys()
        counts: defaultdict[str, set[int]] = defaultdict(set)
        for data in outputs:
            cluster = data["cluster"]
            assert isinstance(cluster, dict)
            counts[str(data["analysis_id"])].add(int(cluster["count"]))
        wrong = {i: c for i, c in counts.items() if c != {expected[i]}}
        assert not wrong, f"published copies whose count is not the burst's: {wrong}"
        assert all(r.stats.published > 0 for r in replicas), "both replicas did part of the work"

        store = MemoryStore(memory, OnnxEmbedder())
        stored = [case.memory_id for server in SERVERS for case in store.list_cases(server, limit=1000)]
        # Recurrences (same fingerprint at the same commit) are answered from memory and never stored again.
        remembered = {str(d["analysis_id"]) for d in outputs if d["status"] in ("analyzed", "heuristic")}
        assert remembered, "some bursts were analysed rather than answered from memory"
        assert sorted(stored) == sorted(remembered), "each analysis remembered once in the shared memory"
