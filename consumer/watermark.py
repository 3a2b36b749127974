"""Watermarks: how far each input partition has been read, in the clock of its records' broker timestamps.

A burst closes when no event can join it any more (`consumer.window`). Whether one still can depends on
every partition its events may come from: the window stage must know how far each has been read, not only
its own repartition partitions. So every key stage tells it: about once a second it sends each repartition
partition a watermark record with the progress of the input partitions it owns (`Progress.marks`), behind
its forwards, so a window that reads a mark has read every forward it covers. The window takes, for each
of its partitions, the least mark over all input partitions (`Marks.watermark`): a partition that nobody
has reported on yet, or a replica still reading its backlog, holds the bursts open.

A partition's mark is the broker timestamp of the last record read from it; once it is read to its end,
plus the wall time since (what passed without a new record), so a quiet stream still lets bursts close.
A partition that is empty and read to its end stands at the wall clock.

Header of a watermark record (its value is empty): `watermark`, JSON
`{"topic": input topic, "marks": [[partition, broker time in epoch seconds], ...]}`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection
from typing import Any

import orjson

from analysis.errors import BadInput
from consumer.open_burst import PartitionKey

__all__ = ["WATERMARK_HEADER", "Marks", "Progress", "read_marks", "watermark_record"]

WATERMARK_HEADER = "watermark"


class Progress:
    """The last broker time read per partition, and when (`clock`, monotonic); `wall` (epoch seconds)
    places a partition read to its end that has given no record yet."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._wall = wall
        self._read: dict[PartitionKey, tuple[float, float]] = {}

    def read(self, tp: PartitionKey, broker_time: float) -> None:
        """A record of `tp` with this broker time (epoch seconds) was read."""
        self._read[tp] = (broker_time, self._clock())

    def mark(self, tp: PartitionKey, caught_up: bool) -> float | None:
        """How far `tp` is read in broker time; None while unknown (nothing read, not at its end)."""
        read = self._read.get(tp)
        if read is None:
            return self._wall() if caught_up else None
        broker_time, read_at = read
        return broker_time + (self._clock() - read_at) if caught_up else broker_time

    def marks(self, tps: Collection[PartitionKey], caught_up: Callable[[PartitionKey], bool]) -> dict[int, float]:
        """The known marks of `tps` (partitions of one topic), by partition number."""
        marks = {tp[1]: self.mark(tp, caught_up(tp)) for tp in tps}
        return {partition: mark for partition, mark in marks.items() if mark is not None}

    def forget(self, tps: Collection[PartitionKey]) -> None:
        """Partitions left this replica: their new owner reports them."""
        for tp in tps:
            self._read.pop(tp, None)


def watermark_record(topic: str, marks: dict[int, float]) -> list[tuple[str, bytes]]:
    """The headers of a watermark record for the input `topic`."""
    return [(WATERMARK_HEADER, orjson.dumps({"topic": topic, "marks": sorted(marks.items())}))]


def read_marks(value: bytes | None) -> tuple[str, list[tuple[int, float]]]:
    """The input topic and (partition, mark) pairs of a watermark header; `BadInput("not_forwarded")` when
    it is not one of ours."""
    try:
        doc: Any = orjson.loads(value or b"")
        topic, marks = doc["topic"], [(partition, mark) for partition, mark in doc["marks"]]
        if type(topic) is not str or not all(_is_mark(p, m) for p, m in marks):
            raise ValueError("a mark that is not (partition, finite epoch seconds)")
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise BadInput("not_forwarded", f"unreadable watermark record ({type(error).__name__})") from None
    return topic, marks


def _is_mark(partition: Any, mark: Any) -> bool:
    return (type(partition) is int and partition >= 0 and type(mark) in (int, float) and math.isfinite(mark)
            and mark >= 0)


class Marks:
    """The marks read on each repartition partition, per input partition."""

    def __init__(self, input_topic: str) -> None:
        self.input_topic = input_topic
        self._marks: dict[PartitionKey, dict[int, float]] = {}

    @property
    def partitions(self) -> list[PartitionKey]:
        """The repartition partitions marks were read on."""
        return list(self._marks)

    def update(self, tp: PartitionKey, header: bytes | None) -> None:
        """A watermark record read on `tp` (raises `BadInput` for one that is not ours)."""
        topic, marks = read_marks(header)
        if topic == self.input_topic:  # another topic's (the input setting changed): not ours to count
            self._marks.setdefault(tp, {}).update(marks)

    def watermark(self, tp: PartitionKey, partitions: Collection[int] | None) -> float | None:
        """The least mark on `tp` over the input's `partitions`; None while one is unknown."""
        marks = self._marks.get(tp)
        if not marks or not partitions:
            return None
        least = math.inf
        for partition in partitions:
            mark = marks.get(partition)
            if mark is None:
                return None
            least = min(least, mark)
        return least

    def forget(self, tps: Collection[PartitionKey]) -> None:
        """Partitions left this replica, or the broker lost its state."""
        for tp in tps:
            self._marks.pop(tp, None)
