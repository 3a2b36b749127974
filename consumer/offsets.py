"""Offset watermarks: which offset per partition is safe to commit, pure and without I/O.

A message's offset may be committed only once everything it fed is done: the burst it joined was
analysed and its event published, or it went to the DLQ. Open bursts live in the window, which reports
their lowest offsets; bursts closed but not yet published are held here under a token.

A published burst still matters until the commit passes it: if the commit point fell inside its offsets
(an earlier, interleaved burst still open), a restart would replay only its tail and publish that tail
under a new analysis id. So the commit point never lands strictly inside a published burst's span; it
moves back to the span's start, and a replay rebuilds the whole burst with the same id.
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
        self._published: dict[PartitionKey, list[tuple[int, int]]] = {}

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

    def release(self, token: Hashable, spans: Mapping[PartitionKey, tuple[int, int]] | None = None) -> None:
        """The work held under `token` is done (published or sent to the DLQ).

        `spans` are the first and last offsets per partition of a published burst (see the module doc).
        """
        self._holds.pop(token, None)
        for tp, span in (spans or {}).items():
            if span[1] >= self._committed.get(tp, -1):
                self._published.setdefault(tp, []).append(span)

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
        for tp, spans in self._published.items():
            if tp in safe:
                safe[tp] = _outside_spans(safe[tp], spans)
        return safe

    def to_commit(self, open_holds: Mapping[PartitionKey, int] | None = None) -> dict[PartitionKey, int]:
        """The committable offsets that moved since the last `committed(...)`."""
        return {
            tp: offset
            for tp, offset in self.committable(open_holds).items()
            if offset > self._committed.get(tp, -1)
        }

    def last_committed(self, tp: PartitionKey) -> int | None:
        """The offset this consumer last committed for `tp` since it was assigned, if any."""
        return self._committed.get(tp)

    def committed(self, offsets: Mapping[PartitionKey, int]) -> None:
        """Record a successful commit so `to_commit` does not repeat it."""
        for tp, offset in offsets.items():
            if offset > self._committed.get(tp, -1):
                self._committed[tp] = offset
            if tp in self._published:
                # A span wholly below the commit can no longer be cut by it.
                self._published[tp] = [span for span in self._published[tp] if span[1] >= offset]

    def forget_partitions(self, tps: Iterable[PartitionKey]) -> None:
        """Drop what is known about revoked partitions: their new owner replays from the last commit.

        Holds on them are dropped too; a burst still held elsewhere keeps its other partitions held.
        """
        gone = set(tps)
        for tp in gone:
            self._next.pop(tp, None)
            self._committed.pop(tp, None)
            self._published.pop(tp, None)
        for held in self._holds.values():
            for tp in gone & held.keys():
                del held[tp]


def _outside_spans(offset: int, spans: list[tuple[int, int]]) -> int:
    """Move `offset` back until it cuts no span (first < offset <= last); spans may chain."""
    moved = True
    while moved:
        moved = False
        for first, last in spans:
            if first < offset <= last:
                offset = first
                moved = True
    return offset
