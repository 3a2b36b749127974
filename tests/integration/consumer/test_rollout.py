"""A rolling update as Kubernetes runs one: three replicas over two partitions, replaced one at a time, each
new one waited for until /readyz says 200 (what `kubectl rollout status` and `helm upgrade --wait` do).

Real tansu broker, three in-process services with their own HTTP endpoint, local memory (ONNX embedder).
A replica that owns no partition must still be ready, or the rollout would hang on it.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
import urllib.error
import urllib.request
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from consumer.runner import serve
from consumer.settings import ReadinessSettings, Settings
from demo.broker import EmbeddedBroker
from tests.conftest import SettingsFactory, make_settings
from tests.ports import free_port

pytestmark = pytest.mark.integration

_REPLICAS = 3
_PARTITIONS = 2
# A rollout waits minutes for readiness (progressDeadlineSeconds 600); a minute covers a rebalance that
# tansu holds while a leaving member's LeaveGroup is still pending (up to the 40 s request timeout).
_READY_WITHIN_S = 60.0
_STOP_WITHIN_S = 60.0  # the chart's terminationGracePeriodSeconds: shutdown_grace_s + a LeaveGroup



def _readyz(port: int) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
    except OSError:
        return 0, {}


async def _stopped(replicas: list[Replica], what: str) -> None:
    """Every replica's task ends within the time a pod is given to stop; never waits longer (a cancelled
    wait would block on the task again)."""
    tasks = {r.task for r in replicas}
    _, pending = await asyncio.wait(tasks, timeout=_STOP_WITHIN_S)
    if pending:  # say where each stuck coroutine waits, so a failure on CI can be read
        stacks = io.StringIO()
        for task in asyncio.all_tasks():
            task.print_stack(limit=8, file=stacks)
        raise AssertionError(f"{what}: {len(pending)} replica(s) still running {_STOP_WITHIN_S}s after their "
                             f"stop; every task:\n{stacks.getvalue()}")


def _run_bounded(main: Coroutine[Any, Any, None]) -> None:
    """`asyncio.run`, except that tasks left running by a failure get a bounded time to end after being
    cancelled, so a failing test reports instead of hanging until the pytest timeout."""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main)
    finally:
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        if left:
            loop.run_until_complete(asyncio.wait(left, timeout=_STOP_WITHIN_S))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


@dataclass
class Replica:
    """One pod: its settings (own client id, data dir and port), its stop switch and its task."""

    settings: Settings
    stop: asyncio.Event
    task: asyncio.Task[None]

    @property
    def port(self) -> int:
        return self.settings.http.port


class TestRollingUpdate:
    def test_three_replicas_over_two_partitions_are_all_ready_through_a_roll(
        self, settings_factory: SettingsFactory, tmp_path: Path
    ) -> None:
        """Every replica turns ready, the one without a partition included, and stays ready while the others
        are replaced one by one; at every settled step the two partitions are owned exactly once."""
        # Keyed input: replicas share the input's partitions only (with the repartition topic there would be
        # twice as many to share, and no standby replica to check).
        base = settings_factory(partitions=_PARTITIONS, input={"keyed_by_server": True})
        seen_standby: list[int] = []

        def settings_of(index: int) -> Settings:
            return base.model_copy(update={
                "data_dir": tmp_path / f"pod-{index}",
                "kafka": base.kafka.model_copy(update={"client_id": f"logagent-{index}"}),
                "http": base.http.model_copy(update={"host": "127.0.0.1", "port": free_port()}),
                "memory": base.memory.model_copy(update={"uri": str(tmp_path / f"pod-{index}" / "memory")}),
                "repo": base.repo.model_copy(update={"cache_dir": tmp_path / f"pod-{index}" / "repos"}),
            })

        def start(index: int) -> Replica:
            settings = settings_of(index)
            stop = asyncio.Event()
            return Replica(settings, stop, asyncio.create_task(serve(settings, stop)))

        async def settled(replicas: list[Replica], what: str) -> None:
            """Every replica ready and the partitions owned exactly once, within the time a rollout waits."""
            deadline = time.monotonic() + _READY_WITHIN_S
            while True:
                for replica in replicas:
                    if replica.task.done():
                        replica.task.result()
                        raise AssertionError(f"{what}: a replica stopped by itself")
                answers = [await asyncio.to_thread(_readyz, r.port) for r in replicas]
                owned = [int(body.get("partitions", -1)) for _, body in answers]
                if all(status == 200 for status, _ in answers) and sum(owned) == _PARTITIONS:
                    seen_standby.extend(i for i, count in enumerate(owned) if count == 0)
                    return
                assert time.monotonic() < deadline, f"{what}: not all ready: {answers}"
                await asyncio.sleep(0.2)

        async def scenario() -> None:
            replicas = [start(i) for i in range(_REPLICAS)]
            try:
                await settled(replicas, "first install")
                for index in reversed(range(_REPLICAS)):  # a StatefulSet rolls from the highest ordinal
                    old = replicas[index]
                    old.stop.set()
                    await _stopped([old], f"replica {index} in the roll")
                    replicas[index] = start(index)
                    await settled(replicas, f"after replacing replica {index}")
            finally:
                for replica in replicas:
                    replica.stop.set()
                await _stopped(replicas, "the replicas at the end")

        _run_bounded(scenario())
        assert seen_standby, "one replica had no partition and was ready all the same"


class TestBrokerLoss:
    def test_a_broker_gone_past_the_grace_period_makes_the_replica_unready(self, tmp_path: Path) -> None:
        """The metadata probe notices a broker that stopped answering: ready while it answers, 503 naming
        broker_reachable once the grace period has passed without an answer."""
        port = free_port()

        async def scenario(broker: EmbeddedBroker, settings: Settings) -> list[tuple[int, dict[str, object]]]:
            stop = asyncio.Event()
            task = asyncio.create_task(serve(settings, stop))
            seen: list[tuple[int, dict[str, object]]] = []
            try:
                deadline = time.monotonic() + _READY_WITHIN_S
                while (await asyncio.to_thread(_readyz, port))[0] != 200:
                    assert time.monotonic() < deadline and not task.done(), "never ready"
                    await asyncio.sleep(0.2)
                seen.append(await asyncio.to_thread(_readyz, port))
                broker.stop()
                deadline = time.monotonic() + 20
                while True:
                    answer = await asyncio.to_thread(_readyz, port)
                    if answer[0] == 503:
                        seen.append(answer)
                        return seen
                    assert time.monotonic() < deadline, f"still ready without a broker: {answer}"
                    await asyncio.sleep(0.2)
            finally:
                stop.set()
                await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 60)

        with EmbeddedBroker(port=free_port()) as broker:
            base = make_settings(broker.bootstrap_servers, tmp_path / "data", partitions=1)
            settings = base.model_copy(update={
                "http": base.http.model_copy(update={"host": "127.0.0.1", "port": port}),
                "readiness": ReadinessSettings(broker_grace_s=2.0, broker_probe_s=0.5),
            })
            ready, unready = asyncio.run(scenario(broker, settings))
        assert ready[0] == 200
        assert unready[1]["failing"] == ["broker_reachable"]
