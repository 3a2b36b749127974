"""`python -m demo.read`: every record of a topic of a real tansu broker as JSON lines, and its one-line errors."""

from __future__ import annotations

import asyncio
import json

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
    """Values as JSON when they are, as text when not (a JSON string stays told apart from text); headers
    in order with a name repeated; bytes that are not UTF-8 escaped; big integers exact; NaN and nesting
    too deep to print shown as text."""
    topic = topic_factory("read", partitions=2)
    deep = b"[" * 1200 + b"]" * 1200
    asyncio.run(_send(tansu.bootstrap_servers, topic, [
        (1, b"k1", b'{"id": "a"}', [("reason", b"not_json"), ("h", b"one"), ("h", b"two")]),
        (0, None, b"not json \xff", []),
        (0, None, b'"not json"', []),
        (1, b"\xfe", b'{"n": 18446744073709551617}', []),
        (1, None, b'{"x": NaN}', []),
        (1, None, deep, []),
        (0, None, b'"\\ud800"', []),  # valid JSON, a lone surrogate: not printable as UTF-8
        (0, None, b"1\x00", []),  # JSON only read as UTF-16
        (0, None, b'{"a": 1, "a": 2}', []),
    ]))
    assert main([topic, "--bootstrap-servers", tansu.bootstrap_servers]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        {"partition": 0, "offset": 0, "key": None, "headers": [], "text": "not json \\xff"},
        {"partition": 0, "offset": 1, "key": None, "headers": [], "value": "not json"},
        {"partition": 0, "offset": 2, "key": None, "headers": [], "text": '"\\ud800"'},
        {"partition": 0, "offset": 3, "key": None, "headers": [], "text": "1\x00"},
        {"partition": 0, "offset": 4, "key": None, "headers": [], "text": '{"a": 1, "a": 2}'},
        {"partition": 1, "offset": 0, "key": "k1", "headers": [["reason", "not_json"], ["h", "one"], ["h", "two"]],
         "value": {"id": "a"}},
        {"partition": 1, "offset": 1, "key": "\\xfe", "headers": [], "value": {"n": 18446744073709551617}},
        {"partition": 1, "offset": 2, "key": None, "headers": [], "text": '{"x": NaN}'},
        {"partition": 1, "offset": 3, "key": None, "headers": [], "text": deep.decode()},
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
