"""The forward producer's partitioner: the same partition as aiokafka's (and Kafka's) default for every key."""

from __future__ import annotations

from aiokafka.partitioner import DefaultPartitioner
from hypothesis import given
from hypothesis import strategies as st

from consumer.kafka import partition_by_key


@given(st.binary(max_size=200), st.integers(min_value=1, max_value=64))
def test_same_partition_as_the_default(key: bytes, count: int) -> None:
    partitions = list(range(count))
    expected = DefaultPartitioner()(key, partitions, partitions)
    assert partition_by_key(key, partitions, partitions) == expected
    assert partition_by_key(key, partitions, partitions) == expected  # remembered, still the same


def test_no_key_takes_an_available_partition() -> None:
    assert {partition_by_key(None, [0, 1, 2, 3], [2]) for _ in range(20)} == {2}
