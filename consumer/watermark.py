"""Watermarks: how far each input partition has been read, in the clock of its records' broker timestamps.

A burst closes when no event can join it any more (`consumer.window`). Whether one still can depends on
every partition its events may come from: the window stage must know how far each has been read, not only
its own repartition partitions. So every key stage tells it: every `repartition.watermark_interval_ms` it
sends each repartition partition a watermark record with the progress of the input partitions it owns
(`Progress.marks`), behind its forwards, so a window that reads a mark has read every forward it covers.
The window takes, for each of its partitions, the least mark over all input partitions
(`Marks.watermark`): a partition nobody has reported on yet, or a replica still reading its backlog, holds
the bursts open.

A partition's mark is a low broker time of the last 64 events read from it, the 8th lowest, and when it
was last seen at its end. The timestamps are the producers' (`CreateTime`): a record stamped ahead counts
as read now, and only 57 of 64 stamped ahead would close bursts early (splitting them, one analysis
each), or 8 stamped far behind hold them (until the wall-time length cap).

Once every input partition has been read to its end, idleness also counts in wall time, as for a live
stream: a burst closes once every partition was seen at its end the quiet time after the burst's last
event reached the window. Seen when: by the fetch that showed the partition's end (aiokafka's
per-partition fetch state, `Progress.fetched`), not when the mark is sent nor when a window reads it. A
key stage slowed by its machine leaves its last mark standing while its forwards are late: only the time
of the end it saw tells that the forwards still to come were read after it. So marks go out every
interval, idle or not, and a window waits for one seen late enough.

Header of a watermark record (its value is empty): `watermark`, JSON `{"topic": input topic, "marks":
[[partition, broker time in epoch seconds, read to its end now], ...], "ends": [[partition, epoch
seconds it was last seen at its end], ...]}`. A replica that predates `ends` sends none: its "read to its
end now" then counts as seen at its end at the time the window checks, the rule before end times.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Collection
from typing import Any

import orjson

from analysis.errors import BadInput
from consumer.open_burst import PartitionKey

__all__ = ["WATERMARK_HEADER", "Mark", "Marks", "Progress", "broker_time", "not_ahead", "read_marks",
           "watermark_record"]

WATERMARK_HEADER = "watermark"
Mark = tuple[float, float | None]
"""How far a partition is read: the broker time (epoch seconds) its events are read up to, and when it was
last seen at its end (epoch seconds; None: not yet; inf: at its end now, from a replica that predates end
times)."""
# Events a partition's mark is taken over: enough that a few outliers do not move it.
_RECENT = 64
# How far ahead of this clock a mark or a record's time may be (another host's clock).
_MAX_AHEAD_S = 60.0


class Progress:
    """The broker times of the last events read per partition, and when each was last seen at its end."""

    def __init__(self) -> None:
        self._recent: dict[PartitionKey, deque[float]] = {}
        self._polls: dict[PartitionKey, tuple[float | None, float | None]] = {}
        self._ends: dict[PartitionKey, float] = {}

    def read(self, tp: PartitionKey, broker_time: float) -> None:
        """An event of `tp` with this broker time (epoch seconds) was read."""
        recent = self._recent.get(tp)
        if recent is None:
            recent = self._recent[tp] = deque(maxlen=_RECENT)
        recent.append(broker_time)

    def fetched(self, tp: PartitionKey, polled_at: float | None, at_end: bool) -> None:
        """`tp`'s last fetch response was handled at `polled_at` (epoch seconds; None before the first), and
        `at_end`: everything up to the end reported by that fetch (or a later one) is read.

        The end counts as seen when the fetch before that one was handled: aiokafka asks a broker for more
        only once its last answer is handled, so the broker saw the end after that. Not the response's own
        time: a loop busy for seconds handles an answer late, after records it did not hold had come."""
        last, before = self._polls.get(tp, (None, None))
        if polled_at != last:
            last, before = polled_at, last
            self._polls[tp] = (last, before)
        if at_end and before is not None:
            self._ends[tp] = before

    def low(self, tp: PartitionKey) -> float | None:
        """The broker time `tp`'s events are read up to: the 8th lowest of its last 64 (None: none read)."""
        recent = self._recent.get(tp)
        return sorted(recent)[(len(recent) - 1) // 8] if recent else None

    def mark(self, tp: PartitionKey) -> Mark | None:
        """How far `tp` is read; None while unknown (nothing read, and not yet seen at its end)."""
        end = self._ends.get(tp)
        low = self.low(tp)
        if low is None:  # whatever comes next arrives after its end was seen
            return None if end is None else (end, end)
        return low, end

    def marks(self, tps: Collection[PartitionKey]) -> dict[int, Mark]:
        """The known marks of `tps` (partitions of one topic), by partition number."""
        marks = {tp[1]: self.mark(tp) for tp in tps}
        return {partition: mark for partition, mark in marks.items() if mark is not None}

    def forget(self, tps: Collection[PartitionKey]) -> None:
        """Partitions left this replica: their new owner reports them."""
        for tp in tps:
            self._recent.pop(tp, None)
            self._polls.pop(tp, None)
            self._ends.pop(tp, None)


def broker_time(message: Any) -> float:
    """A record's broker timestamp in epoch seconds, no later than now (now, for a record that has none).
    The producer sets it (`CreateTime`), so it is input too: see the module doc."""
    now = time.time()
    stamp = message.timestamp
    return min(stamp / 1000, now) if isinstance(stamp, int) and stamp >= 0 else now


def not_ahead(broker_time: float) -> float:
    """`broker_time`, but no later than a minute past this clock (a forged or skewed timestamp)."""
    return min(broker_time, time.time() + _MAX_AHEAD_S)


def watermark_record(topic: str, marks: dict[int, Mark], at_end: Collection[int]) -> list[tuple[str, bytes]]:
    """The headers of a watermark record for the input `topic`; `at_end`: the partitions read to their end
    now (for replicas that predate end times)."""
    listed = sorted(marks.items())
    doc = {"topic": topic, "marks": [(partition, at, partition in at_end) for partition, (at, _) in listed],
           "ends": [(partition, end) for partition, (_, end) in listed if end is not None]}
    return [(WATERMARK_HEADER, orjson.dumps(doc))]


def read_marks(value: bytes | None) -> tuple[str, list[tuple[int, Mark]]]:
    """The input topic and (partition, mark) pairs of a watermark header; `BadInput("not_forwarded")` when
    it is not one of ours."""
    try:
        doc: Any = orjson.loads(value or b"")
        topic, marks = doc["topic"], [(partition, at, through) for partition, at, through in doc["marks"]]
        listed = doc.get("ends")  # None from a replica that predates end times
        ends = None if listed is None else dict(listed)
        if type(topic) is not str or not all(_is_partition(p) and _is_time(at) and type(through) is bool
                                             for p, at, through in marks):
            raise ValueError("a mark that is not (partition, finite epoch seconds, read through)")
        if ends is not None and not all(_is_partition(p) and _is_time(end) for p, end in ends.items()):
            raise ValueError("an end that is not (partition, finite epoch seconds)")
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError) as error:
        raise BadInput("not_forwarded", f"unreadable watermark record ({type(error).__name__})") from None

    def end(partition: int, through: bool) -> float | None:
        if ends is None:  # an older replica: at its end now, or not
            return math.inf if through else None
        return ends.get(partition)

    return topic, [(partition, (not_ahead(at), end(partition, through))) for partition, at, through in marks]


def _is_partition(value: Any) -> bool:
    return type(value) is int and value >= 0


def _is_time(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value) and value >= 0


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

    def saw(self, tp: PartitionKey, partition: int, broker_time: float) -> None:
        """A forward of the input's `partition` with this broker time came on `tp`: that partition is not
        read past it here, whatever its last mark said (one sent before its key stage read it, which
        placed a partition with nothing read at the time its end was seen)."""
        marks = self._marks.get(tp)
        mark = marks.get(partition) if marks else None
        if marks is not None and mark is not None and mark[0] > broker_time:
            marks[partition] = (broker_time, mark[1])

    def watermark(self, tp: PartitionKey, partitions: Collection[int] | None) -> Mark | None:
        """On `tp`, over the input's `partitions`: the least broker time, and the least time one was seen
        at its end (None while one was not); None while one is unknown."""
        marks = self._marks.get(tp)
        if not marks or not partitions:
            return None
        least: float = math.inf
        ends: float | None = math.inf
        for partition in partitions:
            mark = marks.get(partition)
            if mark is None:
                return None
            least = min(least, mark[0])
            ends = None if ends is None or mark[1] is None else min(ends, mark[1])
        return least, ends

    def forget(self, tps: Collection[PartitionKey] | None = None) -> None:
        """Partitions left this replica (`tps`), or the broker lost its state (every one)."""
        for tp in list(self._marks) if tps is None else tps:
            self._marks.pop(tp, None)
