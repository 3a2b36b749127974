"""Watermarks: how far each input partition has been read, in the clock of its records' broker timestamps.

A burst closes when no event can join it any more (`consumer.window`). Whether one still can depends on
every partition its events may come from: the window stage must know how far each has been read, not only
its own repartition partitions. So every key stage tells it: every `repartition.watermark_interval_ms` it
sends each repartition partition a watermark record with the progress of the input partitions it owns
(`Progress.marks`), behind its forwards, so a window that reads a mark has read every forward it covers.
The window takes, for each of its partitions, the least mark over all input partitions
(`Marks.watermark`): a partition nobody has reported on yet, or a replica still reading its backlog, holds
the bursts open.

A partition still being read stands at the least broker time of the last 64 events read from it: the
timestamps are the producers' (`CreateTime`), so one record stamped far ahead or far behind must neither
close nor hold everyone's bursts. A partition read to its end stands at infinity (`null` in the record):
it holds nothing back, and once every partition is read to its end, idleness is counted in wall time, as
for a live stream.

Header of a watermark record (its value is empty): `watermark`, JSON
`{"topic": input topic, "marks": [[partition, broker time in epoch seconds, or null], ...]}`.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Collection
from typing import Any

import orjson

from analysis.errors import BadInput
from consumer.open_burst import PartitionKey

__all__ = ["READ_THROUGH", "WATERMARK_HEADER", "Marks", "Progress", "not_ahead", "read_marks", "watermark_record"]

WATERMARK_HEADER = "watermark"
READ_THROUGH = math.inf
"""The mark of a partition read to its end: it holds nothing back."""
# Events a partition's mark is the least broker time of: enough that a few outliers do not move it.
_RECENT = 64
# How far ahead of this clock a mark or a record's time may be (another host's clock).
_MAX_AHEAD_S = 60.0


class Progress:
    """The broker times of the last events read per partition."""

    def __init__(self) -> None:
        self._recent: dict[PartitionKey, deque[float]] = {}

    def read(self, tp: PartitionKey, broker_time: float) -> None:
        """An event of `tp` with this broker time (epoch seconds) was read."""
        recent = self._recent.get(tp)
        if recent is None:
            recent = self._recent[tp] = deque(maxlen=_RECENT)
        recent.append(broker_time)

    def mark(self, tp: PartitionKey, caught_up: bool) -> float | None:
        """How far `tp` is read: `READ_THROUGH` at its end, else the least recent broker time; None while
        unknown (nothing read yet)."""
        if caught_up:
            return READ_THROUGH
        recent = self._recent.get(tp)
        return min(recent) if recent else None

    def marks(self, tps: Collection[PartitionKey], caught_up: Callable[[PartitionKey], bool]) -> dict[int, float]:
        """The known marks of `tps` (partitions of one topic), by partition number."""
        marks = {tp[1]: self.mark(tp, caught_up(tp)) for tp in tps}
        return {partition: mark for partition, mark in marks.items() if mark is not None}

    def forget(self, tps: Collection[PartitionKey]) -> None:
        """Partitions left this replica: their new owner reports them."""
        for tp in tps:
            self._recent.pop(tp, None)


def not_ahead(broker_time: float) -> float:
    """`broker_time`, but no later than a minute past this clock (a forged or skewed timestamp)."""
    return min(broker_time, time.time() + _MAX_AHEAD_S)


def watermark_record(topic: str, marks: dict[int, float]) -> list[tuple[str, bytes]]:
    """The headers of a watermark record for the input `topic`."""
    listed = [(partition, None if math.isinf(mark) else mark) for partition, mark in sorted(marks.items())]
    return [(WATERMARK_HEADER, orjson.dumps({"topic": topic, "marks": listed}))]


def read_marks(value: bytes | None) -> tuple[str, list[tuple[int, float | None]]]:
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
    """(partition, finite epoch seconds or null for read through)."""
    return type(partition) is int and partition >= 0 and (
        mark is None or (type(mark) in (int, float) and math.isfinite(mark) and mark >= 0))


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
            self._marks.setdefault(tp, {}).update(
                (partition, READ_THROUGH if mark is None else not_ahead(mark)) for partition, mark in marks)

    def watermark(self, tp: PartitionKey, partitions: Collection[int] | None) -> float | None:
        """The least mark on `tp` over the input's `partitions` (`READ_THROUGH` when every one is read to
        its end); None while one is unknown."""
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
