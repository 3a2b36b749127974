"""Watermarks: how far each input partition is read, extrapolated while it is read to its end."""

from __future__ import annotations

import time
from types import SimpleNamespace

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
        assert progress.mark(TP0, caught_up=False) == (1007.0, False)
        for _ in range(7):
            progress.read(TP0, 9_000_000_000.0)
        assert progress.mark(TP0, caught_up=False) == (1014.0, False)
        for _ in range(7):
            progress.read(TP0, 1.0)
        assert progress.mark(TP0, caught_up=True) == (1014.0, True)
        progress.read(TP0, 1.0)
        assert progress.mark(TP0, caught_up=True) == (1.0, True)

    def test_a_partition_with_nothing_read_is_unknown_until_read_to_its_end(self) -> None:
        """Empty and read to its end, whatever comes next arrives from now on (the wall clock)."""
        progress = Progress(wall=lambda: 5000.0)
        assert progress.mark(TP0, caught_up=False) is None
        assert progress.marks([TP0, TP1], lambda tp: tp == TP1) == {1: (5000.0, True)}
        progress.read(TP0, 1000.0)
        progress.forget([TP0])
        assert progress.mark(TP0, caught_up=False) is None


class TestMarks:
    def test_forged_times_count_as_at_most_a_minute_ahead(self) -> None:
        """A mark far in the future (a forged record on the internal topic) is capped."""
        (_, header), = watermark_record("errors", {0: (5.0, True), 1: (1e300, False)})
        marks = Marks("errors")
        marks.update(("bursts", 0), header)
        least, through = marks.watermark(("bursts", 0), {1}) or (0.0, True)
        assert least <= time.time() + 61 and not through
        assert marks.watermark(("bursts", 0), {0, 1}) == (5.0, False)

    def test_the_watermark_is_the_least_mark_over_the_input_partitions(self) -> None:
        """Read to its end only when every input partition is; marks are per repartition partition."""
        marks = Marks("errors")
        (_, header), = watermark_record("errors", {0: (300.0, True)})
        marks.update(("bursts", 0), header)
        assert marks.watermark(("bursts", 0), {0, 1}) is None  # partition 1 unheard of
        (_, header), = watermark_record("errors", {1: (120.0, True)})
        marks.update(("bursts", 0), header)
        assert marks.watermark(("bursts", 0), {0, 1}) == (120.0, True)
        (_, header), = watermark_record("errors", {0: (310.0, False)})
        marks.update(("bursts", 0), header)
        assert marks.watermark(("bursts", 0), {0, 1}) == (120.0, False)
        assert marks.watermark(("bursts", 1), {0, 1}) is None
        assert marks.watermark(("bursts", 0), None) is None

    @pytest.mark.parametrize("value", [
        None, b"", b"not json", b"[]", b'{"topic": "errors"}', b'{"topic": 3, "marks": []}',
        b'{"topic": "errors", "marks": [[0, "NaN", true]]}', b'{"topic": "errors", "marks": [[-1, 5.0, true]]}',
        b'{"topic": "errors", "marks": [[0, -5.0, true]]}', b'{"topic": "errors", "marks": [[0, 5.0]]}',
        b'{"topic": "errors", "marks": [[true, 5.0, true]]}', b'{"topic": "errors", "marks": {"0": 5.0}}',
        b'{"topic": "errors", "marks": [[0, null, true]]}', b'{"topic": "errors", "marks": [[0, 5.0, 1]]}',
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
