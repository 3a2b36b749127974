"""Consumer lag as SREs' tools measure it, before and after a rebalance, on the real tansu broker.

`logagent_consumer_lag` is the end offset minus the group's committed offset (kafka-exporter's and
Burrow's definition), so it counts what open bursts hold back; `logagent_consumer_position_lag` is the
fetch position's distance to the end. A partition that moves to another replica leaves no series behind.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from analysis.code.repo import RepoSync
from consumer.explainer import HeuristicAnalyzer
from consumer.metrics import Metrics
from consumer.pipeline import Service
from tests.conftest import KafkaIO, SettingsFactory, ShopRepos, live_stamps, shop_error

pytestmark = pytest.mark.integration

_T0 = 1_765_000_000.0
_SERVERS = ("alpha", "bravo")  # one per partition


def _lags(metrics: Metrics, group: str, topic: str) -> dict[str, dict[int, float | None]]:
    sample = metrics.registry.get_sample_value
    return {name: {p: sample(name, {"consumergroup": group, "topic": topic, "partition": str(p)})
                   for p in range(len(_SERVERS))}
            for name in ("logagent_consumer_lag", "logagent_consumer_position_lag")}


_OPEN = 29  # events of each partition's open burst


class TestConsumerLag:
    def test_committed_and_position_lag_before_and_after_a_rebalance(
        self, settings_factory: SettingsFactory, kafka_io: KafkaIO, shop_repos: Callable[..., ShopRepos]
    ) -> None:
        """Each partition holds a closed burst and an open one of 29 events: the position lag is 0, the
        committed lag 29 and equal to end minus the offset the broker has committed for the group.
        When a second replica joins, the first keeps series for its remaining partition only, and the
        newcomer reports the partition it took over under the same consumergroup label."""
        repos = shop_repos(*_SERVERS)
        # Input keyed by server: the open bursts hold the input topic itself (with the repartition topic they
        # hold that one instead, and the input commits as soon as its forwards are acknowledged).
        settings = settings_factory(partitions=len(_SERVERS), window={"quiet_s": 30.0, "max_length_s": 120.0},
                                    input={"keyed_by_server": True})
        kafka, group = settings.kafka, settings.kafka.group_id
        topic = kafka.input_topic

        async def produce() -> None:
            for partition, server in enumerate(_SERVERS):
                commit = repos.commits[server]
                closed = [shop_error(server, "total", _T0 + i, commit, i) for i in range(4)]
                # 1000 s later (produced live): the next burst, which stays open. Its 29 events move the
                # partition's watermark (a low quantile of its last 64 events) past the first burst: closed.
                opened = [shop_error(server, "total", _T0 + 1000 + i / 100, commit, 9) for i in range(_OPEN)]
                await kafka_io.produce(topic, closed + opened, keys=[server.encode()] * (4 + _OPEN),
                                       partition=partition, timestamp_ms=live_stamps(closed + opened))

        def service() -> tuple[Service, Metrics]:
            metrics = Metrics()
            return Service(settings, HeuristicAnalyzer(RepoSync(repos.config)), metrics), metrics

        async def until(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
            deadline = time.monotonic() + timeout_s
            while not condition():
                assert time.monotonic() < deadline, what
                await asyncio.sleep(0.1)

        async def scenario() -> tuple[dict[str, dict[int, float | None]], dict[int, int | None],
                                      dict[str, dict[int, float | None]], dict[str, dict[int, float | None]]]:
            first, first_metrics = service()
            stop_first = asyncio.Event()
            task_first = asyncio.create_task(first.run(stop_first))
            await produce()
            settled = {"logagent_consumer_lag": {0: float(_OPEN), 1: float(_OPEN)},
                       "logagent_consumer_position_lag": {0: 0.0, 1: 0.0}}
            await until(lambda: _lags(first_metrics, group, topic) == settled, "first replica's lag settles")
            before = _lags(first_metrics, group, topic)
            committed = await kafka_io.committed(group, topic)

            second, second_metrics = service()
            stop_second = asyncio.Event()
            task_second = asyncio.create_task(second.run(stop_second))

            def split() -> bool:
                mine = {p for p, v in _lags(first_metrics, group, topic)["logagent_consumer_position_lag"].items()
                        if v is not None}
                theirs = {p for p, v in _lags(second_metrics, group, topic)["logagent_consumer_lag"].items()
                          if v is not None}
                return len(mine) == 1 and len(theirs) == 1 and not mine & theirs

            await until(split, "the rebalance splits the partitions")
            await until(lambda: 0.0 in _lags(second_metrics, group, topic)["logagent_consumer_position_lag"].values(),
                        "the newcomer reads its partition to the end")
            after = (_lags(first_metrics, group, topic), _lags(second_metrics, group, topic))
            stop_first.set()
            stop_second.set()
            await asyncio.gather(task_first, task_second)
            return before, committed, *after

        before, committed, first_after, second_after = asyncio.run(scenario())
        ends = asyncio.run(kafka_io.end_offsets(topic))
        assert before["logagent_consumer_lag"] == {p: float(ends[p] - (committed[p] or 0)) for p in ends}
        assert committed == {0: 4, 1: 4}, "the open burst holds its first offset back from the commit"
        for name in before:
            kept = {p for p, v in first_after[name].items() if v is not None}
            taken = {p for p, v in second_after[name].items() if v is not None}
            assert len(kept) == 1 and len(taken) == 1 and kept | taken == {0, 1}, (name, first_after, second_after)
        (moved,) = (p for p, v in second_after["logagent_consumer_lag"].items() if v is not None)
        assert second_after["logagent_consumer_lag"][moved] == float(_OPEN)
        assert second_after["logagent_consumer_position_lag"][moved] == 0.0
