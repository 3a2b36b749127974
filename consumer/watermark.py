"""Watermarks: how far each input partition has been read, in the clock of its records' broker timestamps.

A burst closes when no event can join it any more (`consumer.window`). Whether one still can depends on
every partition its events may come from: the window stage must know how far each has been read, not only
its own repartition partitions. So every key stage tells it: every `repartition.watermark_interval_ms` it
sends each repartition partition a watermark record with the progress of the input partitions it owns
(`Progress.marks`), behind its forwards, so a window that reads a mark has read every forward it covers.
The window takes, for each of its partitions, the least mark over all input partitions
(`Marks.watermark`): a partition nobody has reported on yet, or a replica still reading its backlog, holds
the bursts open.

A partition's mark is a low broker time of the last 64 events read from it, the 8th lowest, and whether
it is read to its end. The timestamps are the producers' (`CreateTime`): a record stamped ahead counts
as read now, and only 57 of 64 stamped ahead would close bursts early (splitting them, one analysis
each), or 8 stamped far behind hold them (until the wall-time length cap). Once every input partition
is read to its end, idleness also counts in wall time, as for a live stream.

Header of a watermark record (its value is empty): `watermark`, JSON `{"topic": input topic, "marks":
[[partition, broker time in epoch seconds, read to its end], ...]}`.
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

__all__ = ["WATERMARK_HEADER", "Mark", "Marks", "Progress", "broker_time", "not_ahead", "read_marks",
           "watermark_record"]

WATERMARK_HEADER = "watermark"
Mark = tuple[float, bool]
"""How far a partition is read: (broker time, epoch seconds), and whether it is read to its end."""
# Events a partition's mark is taken over: enough that a few outliers do not move it.
_RECENT = 64
# How far ahead of this clock a mark or a record's time may be (another host's clock).
_MAX_AHEAD_S = 60.0


class Progress:
    """The broker times of the last events read per partition; `wall` (epoch seconds) places a partition
    read to its end before any event was read from it."""

    def __init__(self, wall: Callable[[], float] = time.time) -> None:
        self._wall = wall
        self._recent: dict[PartitionKey, deque[float]] = {}

    def read(self, tp: PartitionKey, broker_time: float) -> None:
        """An event of `tp` with this broker time (epoch seconds) was read."""
        recent = self._recent.get(tp)
        if recent is None:
            recent = self._recent[tp] = deque(maxlen=_RECENT)
        recent.append(broker_time)

    def mark(self, tp: PartitionKey, caught_up: bool) -> Mark | None:
        """How far `tp` is read (the 8th lowest broker time of its last 64 events); None while unknown
        (nothing read, and more to read)."""
        recent = self._recent.get(tp)
        if not recent:  # whatever comes next arrives from now on
            return (self._wall(), True) if caught_up else None
        return sorted(recent)[(len(recent) - 1) // 8], caught_up

    def marks(self, tps: Collection[PartitionKey], caught_up: Callable[[PartitionKey], bool]) -> dict[int, Mark]:
        """The known marks of `tps` (partitions of one topic), by partition number."""
        marks = {tp[1]: self.mark(tp, caught_up(tp)) for tp in tps}
        return {partition: mark for partition, mark in marks.items() if mark is not None}

    def forget(self, tps: Collection[PartitionKey]) -> None:
        """Partitions left this replica: their new owner reports them."""
        for tp in tps:
            self._recent.pop(tp, None)


def broker_time(message: Any) -> float:
    """A record's broker timestamp in epoch seconds, no later than now (now, for a record that has none).
    The producer sets it (`CreateTime`), so it is input too: see the module doc."""
    now = time.time()
    stamp = message.timestamp
    return min(stamp / 1000, now) if isinstance(stamp, int) and stamp >= 0 else now


def not_ahead(broker_time: float) -> float:
    """`broker_time`, but no later than a minute past this clock (a forged or skewed timestamp)."""
    return min(broker_time, time.time() + _MAX_AHEAD_S)


def watermark_record(topic: str, marks: dict[int, Mark]) -> list[tuple[str, bytes]]:
    """The headers of a watermark record for the input `topic`."""
    listed = [(partition, at, through) for partition, (at, through) in sorted(marks.items())]
    return [(WATERMARK_HEADER, orjson.dumps({"topic": topic, "marks": listed}))]


def read_marks(value: bytes | None) -> tuple[str, list[tuple[int, Mark]]]:
    """The input topic and (partition, mark) pairs of a watermark header; `BadInput("not_forwarded")` when
    it is not one of ours."""
    try:
        doc: Any = orjson.loads(value or b"")
        topic, marks = doc["topic"], [(partition, at, through) for partition, at, through in doc["marks"]]
        if type(topic) is not str or not all(_is_mark(*mark) for mark in marks):
            raise ValueError("a mark that is not (partition, finite epoch seconds, read through)")
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise BadInput("not_forwarded", f"unreadable watermark record ({type(error).__name__})") from None
    return topic, [(partition, (not_ahead(at), through)) for partition, at, through in marks]


def _is_mark(partition: Any, at: Any, through: Any) -> bool:
    return (type(partition) is int and partition >= 0 and type(through) is bool and type(at) in (int, float)
            and math.isfinite(at) and at >= 0)


class Marks:
    """The marks read on each repartition partition, per input partition."""

    def __init__(self, input_topic: str) -> None:
        self.input_topic = input_topic
        self._marks: dict[PartitionKey, dict[int, Mark]] = {}


    def update(self, tp: PartitionKey, header: bytes | None) -> None:
        """A watermark record read on `tp` (raises `BadInput` for one that is not ours)."""
        topic, marks = read_marks(header)
        if topic == self.input_topic:  # another topic's (the input setting changed): not ours to count
            self._marks.setdefault(tp, {}).update(marks)

    def watermark(self, tp: PartitionKey, partitions: Collection[int] | None) -> Mark | None:
        """On `tp`, over the input's `partitions`: the least broker time, and whether every one is read to
        its end; None while one is unknown."""
        marks = self._marks.get(tp)
        if not marks or not partitions:
            return None
        least, through = math.inf, True
        for partition in partitions:
            mark = marks.get(partition)
            if mark is None:
                return None
            least, through = min(least, mark[0]), through and mark[1]
        return least, through

    def forget(self, tps: Collection[PartitionKey] | None = None) -> None:
        """Partitions left this replica (`tps`), or the broker lost its state (every one)."""
        for tp in list(self._marks) if tps is None else tps:
            self._marks.pop(tp, None)
