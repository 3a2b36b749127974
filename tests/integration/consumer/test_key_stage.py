"""The key stage's forwards on a real broker: queued by `ingest`, sent by `flush` in one batch per
repartition partition (more when one fills), each input offset held until every forward of its message is
acknowledged, `forwarded` at the last record of each partition (what `Service.idle` waits for the window
to have read), and a revoke's `settle` while a flush waits on the producer neither sends a forward twice
nor releases an offset early."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import orjson
import pytest

from analysis.intake.decode import DecodeConfig
from analysis.intake.redact import RedactionConfig, Redactor
from consumer.kafka import EventSink, ensure_repartition_topic, make_forward_producer, partition_by_key
from consumer.key_stage import DeadLetters, KeyStage
from consumer.keying import KeyReader
from consumer.metrics import Metrics
from consumer.offsets import OffsetTracker
from consumer.settings import Settings
from consumer.workers import ServiceStats
from tests.conftest import KafkaIO, SettingsFactory

pytestmark = pytest.mark.integration

_INPUT = ("errors", 0)
_FUNCTIONS = ("total", "parse_qty", "split", "refund", "ship", "audit")


@dataclass
class _Input:
    """An input record as aiokafka hands it to the stage."""

    offset: int
    value: bytes
    timestamp: int
    key: bytes | None = None


def _event(function: str, n: int, padding: int = 0) -> bytes:
    return orjson.dumps({"server_id": "shop", "timestamp": 1_717_000_000.0 + n, "message": f"failed {n}",
                         "pad": "x" * padding, "exception": {
                             "type": "KeyError", "value": f"order {n}", "stacktrace": [
                                 {"filename": "app/shop.py", "function": function, "lineno": 3, "in_app": True}]}})


@dataclass
class _Rig:
    """A key stage forwarding to a fresh repartition topic through the service's own forward producer."""

    topic: str
    sink: EventSink
    stage: KeyStage
    offsets: OffsetTracker
    stats: ServiceStats
    metrics: Metrics


@asynccontextmanager
async def _on_broker(settings: Settings) -> AsyncIterator[_Rig]:
    topic = await ensure_repartition_topic(settings.kafka, settings.repartition, settings.input.max_message_bytes)
    producer = make_forward_producer(settings.kafka, settings.repartition, settings.input.max_message_bytes)
    await producer.start()
    try:
        redactor = Redactor(RedactionConfig())
        offsets, stats, metrics, sink = OffsetTracker(), ServiceStats(), Metrics(), EventSink(producer)
        dead_letters = DeadLetters(settings.kafka, offsets, metrics, stats, redactor.redact)
        stage = KeyStage(topic, KeyReader(DecodeConfig(), redactor), sink, offsets, dead_letters, metrics, stats,
                         forward=True, mark_every_s=60.0, max_forward_bytes=4 << 20)
        yield _Rig(topic, sink, stage, offsets, stats, metrics)
    finally:
        await producer.stop()


def _otlp(failures: list[tuple[str, str]], padding: int) -> bytes:
    """An OTLP export of one record per (service, exception type), each with a body of `padding` bytes."""
    return orjson.dumps({"resourceLogs": [
        {"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
         "scopeLogs": [{"logRecords": [{"timeUnixNano": "1717000000000000000",
                                        "body": {"stringValue": "failed " + "x" * padding},
                                        "attributes": [{"key": "exception.type", "value": {"stringValue": kind}}]}]}]}
        for service, kind in failures]})


class TestForwardsInBatches:
    def test_a_turn_goes_in_one_batch_a_partition_and_offsets_wait_for_its_acknowledgement(
            self, settings_factory: SettingsFactory, kafka_io: KafkaIO) -> None:
        """120 messages of six failures, one of 700 kB (past a batch's 512 kB, so a partition takes two
        batches or more): nothing reaches the topic before the turn's flush, every offset stays held until
        the acknowledgements, and then each failure's forwards are on its key's partition in input order,
        `forwarded` at each partition's last record, every offset committable."""
        settings = settings_factory(partitions=3)
        big = 60
        inputs = [_Input(n, _event(_FUNCTIONS[n % len(_FUNCTIONS)], n, 700_000 if n == big else 0), 1_717_000_000_000)
                  for n in range(120)]

        async def scenario() -> None:
            async with _on_broker(settings) as rig:
                topic, stage, offsets, stats, metrics = rig.topic, rig.stage, rig.offsets, rig.stats, rig.metrics
                for message in inputs:
                    stage.ingest(_INPUT, message)
                assert stats.dlq == 0
                assert stage.pending == len(inputs), "one queued forward a message"
                await asyncio.sleep(0.3)
                assert await kafka_io.read_all(topic) == [], "nothing is sent before the flush"
                assert offsets.committable() == {_INPUT: 0}, "offsets held until the forwards are acknowledged"
                await stage.flush()  # waits on the full batches: part may be acknowledged already
                released = offsets.committable()[_INPUT]
                on_topic = {int(r.headers["source_offset"]) for r in await kafka_io.read_all(topic)}
                assert set(range(released)) <= on_topic, "released only past what is on the topic"
                await stage.settle(timeout_s=20)
                stage.check()
                assert stage.pending == 0
                assert offsets.committable() == {_INPUT: len(inputs)}
                assert offsets.held_count == 0

                records = await kafka_io.read_all(topic)
                assert sorted(int(r.headers["source_offset"]) for r in records) == list(range(len(inputs)))
                partitions = await rig.sink.partitions(topic)
                ends: dict[int, int] = {}
                by_key: dict[bytes | None, list[int]] = {}
                for record in sorted(records, key=lambda r: (r.partition, r.offset)):
                    assert record.partition == partition_by_key(record.key, *partitions), "the key's own partition"
                    ends[record.partition] = record.offset
                    by_key.setdefault(record.key, []).append(int(record.headers["source_offset"]))
                assert len(by_key) == len(_FUNCTIONS)
                assert all(offsets_in == sorted(offsets_in) for offsets_in in by_key.values()), "input order kept"
                assert stage.forwarded == {(topic, partition): end for partition, end in ends.items()}
                published = metrics.registry.get_sample_value("logagent_published_total", {"kind": "repartition"})
                assert published == len(inputs)

        started = time.monotonic()
        asyncio.run(scenario())
        assert time.monotonic() - started < 60

    def test_a_revoke_while_a_flush_waits_sends_nothing_twice_and_releases_nothing_early(
            self, settings_factory: SettingsFactory, kafka_io: KafkaIO) -> None:
        """Four OTLP exports, each of two failures of 200 kB on two partitions: each message has two
        forwards, and a batch holds one (a forward's headers repeat its message). aiokafka takes a
        partition's next batch only once the one before it left, so the flush waits there. A revoke's
        `settle` runs meanwhile, as aiokafka runs the callback while the loop waits: it releases only
        messages whose forwards are both acknowledged. Then the flush ends, and every forward is on the
        topic once, every offset committable."""
        settings = settings_factory(partitions=3)
        inputs = [_Input(n, _otlp([("cart", "KeyError"), ("billing", "ValueError")], 200_000), 1_717_000_000_000)
                  for n in range(4)]

        async def scenario() -> None:
            async with _on_broker(settings) as rig:
                topic, stage, offsets, metrics = rig.topic, rig.stage, rig.offsets, rig.metrics
                for message in inputs:
                    stage.ingest(_INPUT, message)
                flush = asyncio.create_task(stage.flush())
                published = {"kind": "repartition"}
                while not metrics.registry.get_sample_value("logagent_published_total", published):  # noqa: ASYNC110 - no event exists
                    await asyncio.sleep(0)  # until the first batch is handed over
                assert not flush.done(), "the flush waits for the partition's first batch to leave"
                await stage.settle(timeout_s=20)  # the revoke's
                # At this instant: what is released, and how far each partition's forwards are acknowledged.
                released, acknowledged = offsets.committable()[_INPUT], dict(stage.forwarded)
                await flush
                await stage.settle(timeout_s=20)
                stage.check()
                records = await kafka_io.read_all(topic)
                assert len({r.partition for r in records}) == 2, "the two failures' forwards on two partitions"
                acked = [int(r.headers["source_offset"]) for r in records
                         if r.offset <= acknowledged.get((topic, r.partition), -1)]
                assert [acked.count(n) for n in range(released)] == [2] * released, \
                    "released only once both forwards are acknowledged"
                assert sorted(int(r.headers["source_offset"]) for r in records) == sorted([*range(len(inputs))] * 2)
                assert offsets.committable() == {_INPUT: len(inputs)} and offsets.held_count == 0
                assert stage.pending == 0

        asyncio.run(scenario())
