"""Offset watermarks: which offset per partition is safe to commit, pure and without I/O.

A message's offset may be committed only once everything it fed is done: the burst it joined was
analysed and its event published, or it went to the DLQ. Open bursts live in the window, which reports
their lowest offsets; bursts closed but not yet published are held here under a token.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping

from consumer.window import PartitionKey

__all__ = ["OffsetTracker"]


class OffsetTracker:
    """Tracks received offsets and holds, and derives the committable offset of each partition."""

    def __init__(self) -> None:
        self._next: dict[PartitionKey, int] = {}
        self._holds: dict[Hashable, dict[PartitionKey, int]] = {}
        self._committed: dict[PartitionKey, int] = {}

    def received(self, tp: PartitionKey, offset: int) -> None:
        """A message was read and handed on; without holds the partition may commit past it."""
        if offset + 1 > self._next.get(tp, -1):
            self._next[tp] = offset + 1

    def hold(self, tp: PartitionKey, offset: int, token: Hashable) -> None:
        """Keep `offset` (and everything after it) of `tp` uncommitted until `release(token)`."""
        held = self._holds.setdefault(token, {})
        current = held.get(tp)
        if current is None or offset < current:
            held[tp] = offset

    def release(self, token: Hashable) -> None:
        """The work held under `token` is done (published or sent to the DLQ)."""
        self._holds.pop(token, None)

    @property
    def held_count(self) -> int:
        """How many tokens still hold offsets."""
        return len(self._holds)

    def committable(self, open_holds: Mapping[PartitionKey, int] | None = None) -> dict[PartitionKey, int]:
        """Per known partition: the lowest offset held (here or by `open_holds`), else last received + 1."""
        safe = dict(self._next)
        held_by = [*self._holds.values(), open_holds or {}]
        for held in held_by:
            for tp, offset in held.items():
                if tp in safe and offset < safe[tp]:
                    safe[tp] = offset
        return safe

    def to_commit(self, open_holds: Mapping[PartitionKey, int] | None = None) -> dict[PartitionKey, int]:
        """The committable offsets that moved since the last `committed(...)`."""
        return {
            tp: offset
            for tp, offset in self.committable(open_holds).items()
            if offset > self._committed.get(tp, -1)
        }

    def committed(self, offsets: Mapping[PartitionKey, int]) -> None:
        """Record a successful commit so `to_commit` does not repeat it."""
        for tp, offset in offsets.items():
            if offset > self._committed.get(tp, -1):
                self._committed[tp] = offset

    def forget_partitions(self, tps: Iterable[PartitionKey]) -> None:
        """Drop what is known about revoked partitions: their new owner replays from the last commit.

        Holds on them are dropped too; a burst still held elsewhere keeps its other partitions held.
        """
        gone = set(tps)
        for tp in gone:
            self._next.pop(tp, None)
            self._committed.pop(tp, None)
        for held in self._holds.values():
            for tp in gone & held.keys():
                del held[tp]
