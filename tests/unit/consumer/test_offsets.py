"""Offset watermarks: commit up to the lowest offset still held, never past unfinished work."""

from __future__ import annotations

from consumer.offsets import OffsetTracker

TP0 = ("errors", 0)
TP1 = ("errors", 1)


class TestOffsetTracker:
    def test_without_holds_the_partition_commits_past_the_last_message(self) -> None:
        """Everything received and handed on: commit last received + 1."""
        tracker = OffsetTracker()
        for offset in range(5):
            tracker.received(TP0, offset)
        assert tracker.committable() == {TP0: 5}

    def test_the_lowest_held_offset_bounds_the_commit(self) -> None:
        """An in-flight burst holding offset 3 keeps the commit at 3 until it is released."""
        tracker = OffsetTracker()
        for offset in range(10):
            tracker.received(TP0, offset)
        tracker.hold(TP0, 6, token="late")
        tracker.hold(TP0, 3, token="early")
        assert tracker.committable() == {TP0: 3}
        tracker.release("early")
        assert tracker.committable() == {TP0: 6}
        tracker.release("late")
        assert tracker.committable() == {TP0: 10}

    def test_open_bursts_of_the_window_also_bound_the_commit(self) -> None:
        """Offsets held by open bursts (passed in) count like in-flight holds, per partition."""
        tracker = OffsetTracker()
        tracker.received(TP0, 9)
        tracker.received(TP1, 4)
        tracker.hold(TP0, 5, token=1)
        assert tracker.committable({TP0: 2, TP1: 1}) == {TP0: 2, TP1: 1}
        assert tracker.committable({TP0: 7}) == {TP0: 5, TP1: 5}

    def test_a_dlq_message_releases_its_hold_once_delivered(self) -> None:
        """A message held for its DLQ delivery stops bounding the commit when released."""
        tracker = OffsetTracker()
        tracker.received(TP0, 0)
        tracker.hold(TP0, 0, token=("dlq", TP0, 0))
        tracker.received(TP0, 1)
        assert tracker.committable() == {TP0: 0}
        tracker.release(("dlq", TP0, 0))
        assert tracker.committable() == {TP0: 2}
        assert tracker.held_count == 0

    def test_to_commit_only_reports_offsets_that_moved(self) -> None:
        """After a commit is recorded, unchanged partitions are not committed again."""
        tracker = OffsetTracker()
        tracker.received(TP0, 3)
        tracker.received(TP1, 3)
        assert tracker.to_commit() == {TP0: 4, TP1: 4}
        tracker.committed({TP0: 4, TP1: 4})
        assert tracker.to_commit() == {}
        tracker.received(TP1, 4)
        assert tracker.to_commit() == {TP1: 5}

    def test_forgetting_revoked_partitions_drops_them_and_their_holds(self) -> None:
        """After a rebalance, a revoked partition is no longer committed, and holds on it disappear."""
        tracker = OffsetTracker()
        tracker.received(TP0, 5)
        tracker.received(TP1, 5)
        tracker.hold(TP0, 1, token="burst")
        tracker.hold(TP1, 2, token="burst")
        tracker.forget_partitions([TP0])
        assert tracker.committable() == {TP1: 2}
        tracker.release("burst")
        assert tracker.committable() == {TP1: 6}

    def test_the_commit_never_cuts_a_published_burst(self) -> None:
        """A burst published over 0..5 while a later one holds 3: commit stays at 0, so a replay rebuilds
        the whole published burst (same id) instead of a tail with a new id."""
        tracker = OffsetTracker()
        for offset in range(8):
            tracker.received(TP0, offset)
        tracker.hold(TP0, 0, token="b")
        tracker.release("b", {TP0: (0, 5)})
        assert tracker.committable({TP0: 3}) == {TP0: 0}
        assert tracker.committable({TP0: 6}) == {TP0: 6}
        assert tracker.committable() == {TP0: 8}

    def test_published_spans_chain_back(self) -> None:
        """Overlapping published spans move the commit back to the earliest start they chain to."""
        tracker = OffsetTracker()
        for offset in range(20):
            tracker.received(TP0, offset)
        tracker.release("x", {TP0: (2, 9)})
        tracker.release("y", {TP0: (7, 15)})
        assert tracker.committable({TP0: 12}) == {TP0: 2}

    def test_spans_below_the_commit_are_forgotten(self) -> None:
        """Once the commit passed a span it can no longer pull the commit back."""
        tracker = OffsetTracker()
        for offset in range(10):
            tracker.received(TP0, offset)
        tracker.release("x", {TP0: (2, 4)})
        tracker.committed({TP0: 6})
        tracker.release("late", {TP0: (1, 3)})
        assert tracker.committable({TP0: 3}) == {TP0: 3}
