"""The key stage's forwards on a real broker: one batch per repartition partition and turn, each input
offset held until every forward of its message is acknowledged, and `forwarded` at the last record of each
partition (what `Service.idle` waits for the window to have read)."""

from __future__ import annotations

import asyncio
import time
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


class TestForwardsInBatches:
    def test_a_turn_goes_in_one_batch_a_partition_and_offsets_wait_for_its_acknowledgement(
            self, settings_factory: SettingsFactory, kafka_io: KafkaIO) -> None:
        """120 messages of six failures, one of 700 kB (past a batch's 512 kB, so a full batch leaves mid
        turn): nothing reaches the topic before the turn's flush, every offset stays held until then, and
        after it each failure's forwards are on its key's partition in input order, `forwarded` at each
        partition's last record, every offset committable."""
        settings = settings_factory(partitions=3)
        big = 60
        inputs = [_Input(n, _event(_FUNCTIONS[n % len(_FUNCTIONS)], n, 700_000 if n == big else 0), 1_717_000_000_000)
                  for n in range(120)]

        async def scenario() -> None:
            topic = await ensure_repartition_topic(settings.kafka, settings.repartition,
                                                   settings.input.max_message_bytes)
            producer = make_forward_producer(settings.kafka, settings.repartition, settings.input.max_message_bytes)
            await producer.start()
            try:
                redactor = Redactor(RedactionConfig())
                offsets, stats, metrics = OffsetTracker(), ServiceStats(), Metrics()
                dead_letters = DeadLetters(settings.kafka, offsets, metrics, stats, redactor.redact)
                stage = KeyStage(topic, KeyReader(DecodeConfig(), redactor), EventSink(producer), offsets,
                                 dead_letters, metrics, stats, forward=True, mark_every_s=60.0,
                                 max_forward_bytes=4 << 20)
                for message in inputs:
                    await stage.ingest(_INPUT, message)
                assert stats.dlq == 0
                assert offsets.committable() == {_INPUT: 0}, "offsets held until the forwards are acknowledged"
                await asyncio.sleep(0.3)
                before = await kafka_io.read_all(topic)
                assert len(before) < len(inputs), "the turn's batches waited for the flush (the full one left)"
                assert stage.pending > 0
                await stage.settle(timeout_s=20)
                stage.check()
                assert stage.pending == 0
                assert offsets.committable() == {_INPUT: len(inputs)}
                assert offsets.held_count == 0

                records = await kafka_io.read_all(topic)
                assert sorted(int(r.headers["source_offset"]) for r in records) == list(range(len(inputs)))
                partitions = await EventSink(producer).partitions(topic)
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
            finally:
                await producer.stop()

        started = time.monotonic()
        asyncio.run(scenario())
        assert time.monotonic() - started < 60
