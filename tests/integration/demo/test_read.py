"""`python -m demo.read`: every record of a topic of a real tansu broker as JSON lines, and its one-line errors."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from demo.broker import EmbeddedBroker
from demo.read import main
from tests.conftest import KafkaIO, TopicFactory

pytestmark = pytest.mark.integration


async def _send(bootstrap: str, topic: str, records: list[tuple[int, bytes | None, bytes, list[tuple[str, bytes]]]],
                ) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for partition, key, value, headers in records:
            await (await producer.send(topic, value=value, key=key, partition=partition, headers=headers))
    finally:
        await producer.stop()


def test_every_record_of_every_partition_in_offset_order(tansu: EmbeddedBroker, topic_factory: TopicFactory,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    topic = topic_factory("read", partitions=2)
    asyncio.run(_send(tansu.bootstrap_servers, topic, [
        (1, b"k1", b'{"id": "a"}', [("reason", b"not_json")]),
        (0, None, b"not json \xff", []),
        (1, None, b'{"id": "b"}', []),
    ]))
    assert main([topic, "--bootstrap-servers", tansu.bootstrap_servers]) == 0
    lines = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        {"partition": 0, "offset": 0, "key": None, "headers": {}, "value": "not json \ufffd"},
        {"partition": 1, "offset": 0, "key": "k1", "headers": {"reason": "not_json"}, "value": {"id": "a"}},
        {"partition": 1, "offset": 1, "key": None, "headers": {}, "value": {"id": "b"}},
    ]


def test_an_empty_topic_prints_nothing(tansu: EmbeddedBroker, topic_factory: TopicFactory,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    topic = topic_factory("read-empty", partitions=3)
    assert main([topic, "--bootstrap-servers", tansu.bootstrap_servers]) == 0
    assert capsys.readouterr() == ("", "")


def test_a_topic_that_does_not_exist_exits_1_with_one_line_and_is_not_created(
        tansu: EmbeddedBroker, kafka_io: KafkaIO, capsys: pytest.CaptureFixture[str]) -> None:
    topic = "read-mistyped-topic"
    assert main([topic, "--bootstrap-servers", tansu.bootstrap_servers]) == 1
    assert capsys.readouterr().err == f"demo.read: {tansu.bootstrap_servers}: no topic {topic!r} there\n"

    assert topic not in asyncio.run(kafka_io.topics())
