"""Watermarks: how far each input partition is read, extrapolated while it is read to its end."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from analysis.errors import BadInput
from consumer.key_stage import broker_time
from consumer.watermark import Marks, Progress, read_marks, watermark_record

TP0, TP1 = ("errors", 0), ("errors", 1)


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class TestProgress:
    def test_a_partition_behind_stands_at_its_last_record(self) -> None:
        """While more is waiting, wall time says nothing: the mark is the last record's broker time."""
        clock = _Clock(10.0)
        progress = Progress(clock, wall=lambda: 5000.0)
        progress.read(TP0, 1000.0)
        clock.now += 60
        assert progress.mark(TP0, caught_up=False) == 1000.0

    def test_a_partition_read_to_its_end_moves_with_the_wall_clock(self) -> None:
        """Read to its end, the time since its last record passed without a new one."""
        clock = _Clock(10.0)
        progress = Progress(clock, wall=lambda: 5000.0)
        progress.read(TP0, 1000.0)
        clock.now += 60
        assert progress.mark(TP0, caught_up=True) == 1060.0

    def test_an_empty_partition_is_unknown_until_read_to_its_end(self) -> None:
        """Nothing read: unknown while behind, the wall clock once at its end."""
        progress = Progress(_Clock(0.0), wall=lambda: 5000.0)
        assert progress.mark(TP0, caught_up=False) is None
        assert progress.marks([TP0, TP1], lambda tp: tp == TP1) == {1: 5000.0}

    def test_forgotten_partitions_are_unknown(self) -> None:
        progress = Progress(_Clock(0.0), wall=lambda: 5000.0)
        progress.read(TP0, 1000.0)
        progress.forget([TP0])
        assert progress.mark(TP0, caught_up=False) is None


class TestMarks:
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
    def test_a_record_stamped_in_the_future_counts_as_at_most_a_minute_ahead(self) -> None:
        """A producer sets the timestamp: one in 2100 must not move its partition's watermark past every
        open burst (closing other tenants' bursts early)."""
        assert broker_time(SimpleNamespace(timestamp=4_102_444_800_000)) <= time.time() + 61
        assert broker_time(SimpleNamespace(timestamp=1_700_000_000_000)) == 1_700_000_000.0
        assert abs(broker_time(SimpleNamespace(timestamp=-1)) - time.time()) < 5
