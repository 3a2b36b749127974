"""Watermarks: how far each input partition is read, and when it was last seen at its end."""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import orjson
import pytest

from analysis.errors import BadInput
from consumer.watermark import Marks, Progress, broker_time, read_marks, watermark_record

TP0, TP1 = ("errors", 0), ("errors", 1)


class TestProgress:
    def test_a_partition_being_read_stands_at_a_low_broker_time_of_its_last_events(self) -> None:
        """Producers set the timestamps: 7 stamped far ahead do not move the mark, and 7 stamped far behind
        do not hold it back; it is the 8th lowest of the last 64."""
        progress = Progress()
        for i in range(64):
            progress.read(TP0, 1000.0 + i)
        assert progress.mark(TP0) == (1007.0, None)
        for _ in range(7):
            progress.read(TP0, 9_000_000_000.0)
        assert progress.mark(TP0) == (1014.0, None)
        for _ in range(7):
            progress.read(TP0, 1.0)
        assert progress.mark(TP0) == (1014.0, None)
        progress.read(TP0, 1.0)
        assert progress.mark(TP0) == (1.0, None)

    def test_the_end_counts_as_seen_when_the_fetch_before_the_one_that_showed_it_was_handled(self) -> None:
        """A fetch answered before new records came can be handled seconds later by a busy loop: only the
        handling of the fetch before it bounds when the broker saw that end."""
        progress = Progress()
        progress.read(TP0, 50.0)
        progress.fetched(TP0, 100.0, at_end=True)
        assert progress.mark(TP0) == (50.0, None)  # the first fetch: nothing bounds it
        progress.fetched(TP0, 101.0, at_end=True)
        assert progress.mark(TP0) == (50.0, 100.0)
        progress.fetched(TP0, 101.0, at_end=True)  # no fetch since: the same bound
        progress.fetched(TP0, 102.0, at_end=False)  # behind: the last end seen stands
        assert progress.mark(TP0) == (50.0, 100.0)
        progress.fetched(TP0, 103.0, at_end=True)
        assert progress.mark(TP0) == (50.0, 102.0)

    def test_a_partition_with_nothing_read_is_unknown_until_seen_at_its_end(self) -> None:
        """Empty and seen at its end, whatever comes next arrives after then (in broker time too)."""
        progress = Progress()
        progress.fetched(TP1, 5000.0, at_end=True)
        progress.fetched(TP1, 5000.5, at_end=True)
        assert progress.marks([TP0, TP1]) == {1: (5000.0, 5000.0)}
        progress.read(TP0, 1000.0)
        progress.forget([TP0, TP1])
        assert progress.marks([TP0, TP1]) == {}


class TestMarks:
    def test_forged_times_count_as_at_most_a_minute_ahead(self) -> None:
        """A mark far in the future (a forged record on the internal topic) is capped."""
        (_, header), = watermark_record("errors", {0: (5.0, 7.0), 1: (1e300, None)}, at_end={0})
        marks = Marks("errors")
        marks.update(("bursts", 0), header)
        least, end = marks.watermark(("bursts", 0), {1}) or (0.0, 0.0)
        assert least <= time.time() + 61 and end is None
        assert marks.watermark(("bursts", 0), {0, 1}) == (5.0, None)

    def test_the_watermark_is_the_least_mark_over_the_input_partitions(self) -> None:
        """Seen at its end only once every input partition was, at the earliest of their times; marks are
        per repartition partition."""
        marks = Marks("errors")
        (_, header), = watermark_record("errors", {0: (300.0, 900.0)}, at_end={0})
        marks.update(("bursts", 0), header)
        assert marks.watermark(("bursts", 0), {0, 1}) is None  # partition 1 unheard of
        (_, header), = watermark_record("errors", {1: (120.0, 880.0)}, at_end={1})
        marks.update(("bursts", 0), header)
        assert marks.watermark(("bursts", 0), {0, 1}) == (120.0, 880.0)
        (_, header), = watermark_record("errors", {0: (310.0, None)}, at_end=())
        marks.update(("bursts", 0), header)
        assert marks.watermark(("bursts", 0), {0, 1}) == (120.0, None)
        assert marks.watermark(("bursts", 1), {0, 1}) is None
        assert marks.watermark(("bursts", 0), None) is None

    def test_a_replica_that_predates_end_times_reads_and_is_read_as_before(self) -> None:
        """A rolling upgrade: an older window reads "read to its end now" from the marks as it always did,
        and an older key stage's "read to its end" counts as seen at its end now (inf, capped by the window
        to its clock) or not at all."""
        (_, header), = watermark_record("errors", {0: (300.0, 900.0), 1: (200.0, 850.0)}, at_end={1})
        older_view = [(partition, at, through) for partition, at, through in orjson.loads(header)["marks"]]
        assert older_view == [(0, 300.0, False), (1, 200.0, True)]
        older = orjson.dumps({"topic": "errors", "marks": [[0, 300.0, False], [1, 200.0, True]]})
        assert read_marks(older) == ("errors", [(0, (300.0, None)), (1, (200.0, math.inf))])

    @pytest.mark.parametrize("value", [
        None, b"", b"not json", b"[]", b'{"topic": "errors"}', b'{"topic": 3, "marks": []}',
        b'{"topic": "errors", "marks": [[0, "NaN", true]]}', b'{"topic": "errors", "marks": [[-1, 5.0, true]]}',
        b'{"topic": "errors", "marks": [[0, -5.0, true]]}', b'{"topic": "errors", "marks": [[0, 5.0]]}',
        b'{"topic": "errors", "marks": [[true, 5.0, true]]}', b'{"topic": "errors", "marks": {"0": 5.0}}',
        b'{"topic": "errors", "marks": [[0, null, true]]}', b'{"topic": "errors", "marks": [[0, 5.0, 1]]}',
        b'{"topic": "errors", "marks": [], "ends": [[0, "NaN"]]}', b'{"topic": "errors", "marks": [], "ends": 5}',
        b'{"topic": "errors", "marks": [], "ends": [[-1, 5.0]]}', b'{"topic": "errors", "marks": [], "ends": [[0]]}',
        b'{"topic": "errors", "marks": [], "ends": {"0": 5.0}}',
        b'{"topic": "errors", "marks": [], "ends": [[0, 1e999]]}',
    ])
    def test_a_record_that_is_not_a_watermark_is_refused(self, value: bytes | None) -> None:
        """Forged or broken marks are bad input (the DLQ's `not_forwarded`), never a crash."""
        with pytest.raises(BadInput) as refused:
            read_marks(value)
        assert refused.value.reason == "not_forwarded"


class TestBrokerTime:
    def test_a_record_stamped_in_the_future_counts_as_read_now(self) -> None:
        """A producer sets the timestamp: one in 2100 counts as now, never ahead of this clock."""
        assert broker_time(SimpleNamespace(timestamp=4_102_444_800_000)) <= time.time()
        assert broker_time(SimpleNamespace(timestamp=1_700_000_000_000)) == 1_700_000_000.0
        assert abs(broker_time(SimpleNamespace(timestamp=-1)) - time.time()) < 5
