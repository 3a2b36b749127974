"""Watermarks: how far each input partition is read, extrapolated while it is read to its end."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from analysis.errors import BadInput
from consumer.key_stage import broker_time
from consumer.watermark import READ_THROUGH, Marks, Progress, read_marks, watermark_record

TP0, TP1 = ("errors", 0), ("errors", 1)


class TestProgress:
    def test_a_partition_being_read_stands_at_the_least_of_its_recent_broker_times(self) -> None:
        """Producers set the timestamps: one stamped far ahead does not move the mark, and one stamped far
        behind holds it back only until 64 more events have been read."""
        progress = Progress()
        for i in range(10):
            progress.read(TP0, 1000.0 + i)
        progress.read(TP0, 9_000_000_000.0)
        assert progress.mark(TP0, caught_up=False) == 1000.0
        progress.read(TP0, 1.0)
        assert progress.mark(TP0, caught_up=False) == 1.0
        for i in range(64):
            progress.read(TP0, 2000.0 + i)
        assert progress.mark(TP0, caught_up=False) == 2000.0

    def test_a_partition_read_to_its_end_holds_nothing_back(self) -> None:
        """Read to its end, whatever its records said: idleness then counts in wall time (the window)."""
        progress = Progress()
        progress.read(TP0, 1.0)
        assert progress.mark(TP0, caught_up=True) == READ_THROUGH
        assert progress.marks([TP0, TP1], lambda tp: tp == TP1) == {0: 1.0, 1: READ_THROUGH}

    def test_a_partition_not_read_yet_is_unknown(self) -> None:
        progress = Progress()
        assert progress.mark(TP0, caught_up=False) is None
        progress.read(TP0, 1000.0)
        progress.forget([TP0])
        assert progress.mark(TP0, caught_up=False) is None


class TestMarks:
    def test_read_through_travels_as_null_and_forged_times_are_capped(self) -> None:
        """A partition read to its end is `null` in the record; a mark far in the future (a forged record on
        the internal topic) counts as at most a minute ahead."""
        (_, header), = watermark_record("errors", {0: READ_THROUGH, 1: 5.0})
        assert read_marks(header) == ("errors", [(0, None), (1, 5.0)])
        marks = Marks("errors")
        marks.update(("bursts", 0), b'{"topic": "errors", "marks": [[0, null], [1, null]]}')
        assert marks.watermark(("bursts", 0), {0, 1}) == READ_THROUGH
        marks.update(("bursts", 0), b'{"topic": "errors", "marks": [[1, 1e300]]}')
        assert (marks.watermark(("bursts", 0), {0, 1}) or 0) <= time.time() + 61

    def test_the_watermark_is_the_least_mark_over_the_input_partitions(self) -> None:
        marks = Marks("errors")
        (_, header), = watermark_record("errors", {0: 300.0})
        marks.update(("bursts", 0), header)
        assert marks.watermark(("bursts", 0), {0, 1}) is None  # partition 1 unheard of
        (_, header), = watermark_record("errors", {1: 120.0})
        marks.update(("bursts", 0), header)
        assert marks.watermark(("bursts", 0), {0, 1}) == 120.0
        assert marks.watermark(("bursts", 1), {0, 1}) is None  # marks are per repartition partition
        assert marks.watermark(("bursts", 0), None) is None

    @pytest.mark.parametrize("value", [
        None, b"", b"not json", b"[]", b'{"topic": "errors"}', b'{"topic": 3, "marks": []}',
        b'{"topic": "errors", "marks": [[0, "NaN"]]}', b'{"topic": "errors", "marks": [[-1, 5.0]]}',
        b'{"topic": "errors", "marks": [[0, -5.0]]}', b'{"topic": "errors", "marks": [[0]]}',
        b'{"topic": "errors", "marks": [[true, 5.0]]}', b'{"topic": "errors", "marks": {"0": 5.0}}',
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
