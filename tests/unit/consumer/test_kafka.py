"""The event sink's own partitioning of forwards: the same partition aiokafka's default partitioner picks."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from aiokafka.partitioner import DefaultPartitioner
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.kafka import EventSink


class _Producer:
    """Just the metadata an EventSink reads of a started producer (aiokafka's, with these partitions)."""

    def __init__(self, partitions: int) -> None:
        self.partitions = set(range(partitions))
        self.client = SimpleNamespace(cluster=SimpleNamespace(partitions_for_topic=lambda topic: self.partitions))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=80), min_size=1, max_size=20), st.integers(1, 64))
def test_a_key_goes_where_the_default_partitioner_sends_it(keys: list[bytes], partitions: int) -> None:
    """Every replica, and one of an older version that still used `send`, sends a key to one partition."""
    sink = EventSink(_Producer(partitions))
    expected = [DefaultPartitioner()(key, sorted(range(partitions)), list(range(partitions))) for key in keys]
    assert [asyncio.run(sink.partition_for("bursts", key)) for key in keys * 2] == expected * 2


def test_a_remembered_partition_is_recomputed_when_the_topic_grows() -> None:
    producer = _Producer(3)
    sink = EventSink(producer)
    key = b'["checkout","f00d"]'
    before = asyncio.run(sink.partition_for("bursts", key))
    producer.partitions = set(range(64))
    after = asyncio.run(sink.partition_for("bursts", key))
    assert (before, after) == (DefaultPartitioner()(key, [0, 1, 2], [0, 1, 2]),
                               DefaultPartitioner()(key, list(range(64)), list(range(64))))
