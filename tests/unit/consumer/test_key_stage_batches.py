"""The key stage's batches against aiokafka's producer interface, with each send's outcome in the test's
hands (the real broker tests are in tests/integration/consumer/test_key_stage.py): a failed batch releases
none of its messages and takes the service down, even when it is handed over while a revoke's settle
waits; a partition that leaves the metadata mid-flush gets its forwards back in the queue, and no
watermark passes them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.producer.message_accumulator import BatchBuilder

from analysis.code.repo import RepoSync
from analysis.intake.decode import DecodeConfig
from analysis.intake.redact import RedactionConfig, Redactor
from consumer.explainer import HeuristicAnalyzer
from consumer.kafka import EventSink, partition_by_key
from consumer.key_stage import DeadLetters, KeyStage
from consumer.keying import KeyReader
from consumer.metrics import Metrics
from consumer.offsets import OffsetTracker
from consumer.pipeline import Service
from consumer.settings import KafkaSettings, Settings
from consumer.workers import ServiceStats

_TOPIC = "bursts-repartition"
_INPUT = ("errors", 0)


@dataclass
class _Input:
    offset: int
    value: bytes
    timestamp: int = 1_717_000_000_000
    key: bytes | None = None


class _Producer:
    """What `EventSink` uses of aiokafka's producer: its metadata, real batch builders, and sends whose
    acknowledgements the test gives (`acks`); `hold` makes the next `send_batch` wait for its event."""

    def __init__(self, partitions: set[int]) -> None:
        self.partitions = partitions
        self.client = self
        self.cluster = self
        self.acks: list[tuple[int, int, asyncio.Future[Any]]] = []  # (partition, records, ack)
        self.marks: list[int] = []
        self.hold: asyncio.Event | None = None
        self.on_send: Any = None

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(self.partitions)

    available_partitions_for_topic = partitions_for_topic

    async def partitions_for(self, topic: str) -> set[int]:
        return set(self.partitions)

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(512 * 1024, 0)

    async def send_batch(self, batch: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[Any]:
        assert partition in self.partitions, "Unrecognized partition"  # as aiokafka's `_partition`
        if self.hold is not None:
            hold, self.hold = self.hold, None
            await hold.wait()
        ack: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.acks.append((partition, batch.record_count(), ack))
        if self.on_send is not None:
            self.on_send()
        return ack

    async def send(self, topic: str, value: bytes, key: bytes | None = None, headers: Any = None,
                   partition: int | None = None) -> asyncio.Future[Any]:
        assert partition is not None
        self.marks.append(partition)
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


@dataclass
class _Metadata:
    topic: str
    partition: int
    offset: int


def _stage(producer: _Producer) -> tuple[KeyStage, OffsetTracker]:
    redactor = Redactor(RedactionConfig())
    offsets, stats, metrics = OffsetTracker(), ServiceStats(), Metrics()
    dead_letters = DeadLetters(KafkaSettings(), offsets, metrics, stats, redactor.redact)
    stage = KeyStage(_TOPIC, KeyReader(DecodeConfig(), redactor), EventSink(producer), offsets,
                     dead_letters, metrics, stats, forward=True, mark_every_s=0.0, max_forward_bytes=4 << 20)
    return stage, offsets


def _event(server: str, n: int, padding: int = 0) -> bytes:
    return orjson.dumps({"server_id": server, "timestamp": 1_717_000_000.0 + n, "message": f"failed {n}",
                         "pad": "x" * padding, "exception": {"type": "KeyError", "value": f"order {n}", "stacktrace": [
                             {"filename": "app/shop.py", "function": "total", "lineno": 3, "in_app": True}]}})


def _partition_of(server: str, partitions: list[int]) -> int:
    return partition_by_key(orjson.dumps([server, _fingerprint(server)]), partitions, partitions)


def _one_message_on_each_of_two_partitions() -> tuple[_Producer, KeyStage, OffsetTracker]:
    """A stage over two partitions with two messages queued, of two servers whose failures' forwards go
    to partitions 0 and 1."""
    servers = {_partition_of(server, [0, 1]): server for server in (f"server-{n}" for n in range(16))}
    assert len(servers) == 2
    producer = _Producer({0, 1})
    stage, offsets = _stage(producer)
    for n in range(2):
        stage.ingest(_INPUT, _Input(n, _event(servers[n], n)))
    return producer, stage, offsets


def _fingerprint(server: str) -> str:
    stage, _ = _stage(_Producer({0}))
    keyed = stage.key(_INPUT, _Input(0, _event(server, 0)))
    assert keyed is not None
    return keyed.groups[0][0].sighting.fingerprint


class TestAFailedBatch:
    def test_releases_none_of_its_messages_and_check_and_settle_raise_it(self) -> None:
        async def scenario() -> None:
            producer = _Producer({0})
            stage, offsets = _stage(producer)
            for n in range(3):
                stage.ingest(_INPUT, _Input(n, _event("shop", n)))
            await stage.flush()
            ((_, records, ack),) = producer.acks
            assert records == 3
            ack.set_exception(KafkaError("refused"))
            await asyncio.sleep(0)
            assert offsets.committable() == {_INPUT: 0}, "a failed batch releases none of its messages"
            with pytest.raises(KafkaError):
                stage.check()
            with pytest.raises(KafkaError):
                await stage.settle(timeout_s=1)

        asyncio.run(scenario())

    def test_handed_over_while_a_revoke_settles_is_still_raised_by_the_next_check(self) -> None:
        """Two partitions: the flush hands the first batch over, then waits on the producer for the second.
        A revoke's settle starts then, waiting for the first; the second is handed over and fails before
        the first is acknowledged. Settle returns, and the next `check` raises the second's error (it did
        not drop out of view with the settled ones)."""
        async def scenario() -> None:
            producer, stage, offsets = _one_message_on_each_of_two_partitions()
            gate = asyncio.Event()
            producer.on_send = lambda: setattr(producer, "hold", gate) if len(producer.acks) == 1 else None
            flush = asyncio.create_task(stage.flush())
            while not producer.acks:  # noqa: ASYNC110 - the fake has no event for it
                await asyncio.sleep(0)
            first = producer.acks[0][2]
            settle = asyncio.create_task(stage.settle(timeout_s=5))
            await asyncio.sleep(0)
            gate.set()
            await flush
            producer.acks[1][2].set_exception(KafkaError("refused"))
            first.set_result(_Metadata(_TOPIC, producer.acks[0][0], 0))
            await settle
            assert offsets.committable() == {_INPUT: 1}, "the acknowledged batch's message is released"
            assert offsets.held_count == 1, "the failed batch's message stays held"
            with pytest.raises(KafkaError):
                stage.check()

        asyncio.run(scenario())

    def test_behind_a_batch_still_waited_for_is_raised_by_check(self) -> None:
        """The first batch is not acknowledged yet, the second failed: `check` raises now (a watermark
        would otherwise cover the message whose forward the second lost)."""
        async def scenario() -> None:
            producer, stage, _ = _one_message_on_each_of_two_partitions()
            await stage.flush()
            assert len(producer.acks) == 2
            producer.acks[1][2].set_exception(KafkaError("refused"))
            await asyncio.sleep(0)
            with pytest.raises(KafkaError):
                stage.check()

        asyncio.run(scenario())


class TestARevokeAfterAFailedSend:
    def test_forgets_the_partitions_and_leaves_the_error_to_the_loop(self, tmp_path: Path) -> None:
        """aiokafka only logs what a revoke callback raises, and would skip the rest of it: the service's
        revoke commits nothing of the partitions but forgets them, and the loop's next check raises."""

        async def scenario() -> None:
            settings = Settings(data_dir=tmp_path)
            service = Service(settings, HeuristicAnalyzer(RepoSync(settings.repo)), Metrics())
            producer = _Producer({0})
            stage = KeyStage(_TOPIC, KeyReader(DecodeConfig(), Redactor(RedactionConfig())), EventSink(producer),
                             service._offsets, service._dead_letters, Metrics(), service.stats, forward=True,
                             mark_every_s=0.0, max_forward_bytes=4 << 20)
            service._key_stage = stage
            await service._on_assigned([TopicPartition(*_INPUT)])
            stage.ingest(_INPUT, _Input(0, _event("shop", 0)))
            await stage.flush()
            producer.acks[0][2].set_exception(KafkaError("refused"))
            await service._on_revoked([TopicPartition(*_INPUT)])
            assert service.assigned == frozenset()
            with pytest.raises(KafkaError):
                stage.check()

        asyncio.run(scenario())


class TestAPartitionGoneMidFlush:
    def test_its_forwards_go_back_to_the_queue_and_no_mark_passes_them(self) -> None:
        """Two 300 kB messages of one failure fill two batches of one partition; the partition leaves the
        metadata once the first is handed over (the topic recreated smaller). The second is not sent to it
        (aiokafka would assert), it waits in the queue, no watermark goes out meanwhile, and the next flush
        sends it to a partition of the new metadata."""

        async def scenario() -> None:
            producer = _Producer({0, 1})
            stage, offsets = _stage(producer)
            for n in range(2):
                stage.ingest(_INPUT, _Input(n, _event("shop", n, 300_000)))
            first = _partition_of("shop", [0, 1])
            producer.on_send = lambda: producer.partitions.discard(first)
            await stage.flush()
            assert [(partition, records) for partition, records, _ in producer.acks] == [(first, 1)]
            assert stage.pending == 2, "one batch handed over, one forward queued"
            await stage.send_marks(_INPUT[0], {_INPUT}, lambda tp: True)
            assert producer.marks == [], "no watermark passes a queued forward"
            producer.on_send = None
            await stage.flush()
            assert [(partition, records) for partition, records, _ in producer.acks][1:] == [(1 - first, 1)]
            for partition, _, ack in producer.acks:
                ack.set_result(_Metadata(_TOPIC, partition, 0))
            await stage.settle(timeout_s=1)
            stage.check()
            assert offsets.committable() == {_INPUT: 2} and stage.pending == 0
            await stage.send_marks(_INPUT[0], {_INPUT}, lambda tp: True)
            assert producer.marks == [1 - first]

        asyncio.run(scenario())
