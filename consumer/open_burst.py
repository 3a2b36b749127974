"""One open burst of the window: its counts, offsets and raw sample candidates; mutable and private to
`consumer.window`, so adding an event copies nothing.

Containers are made only when a second value needs one (most bursts see one commit, one message and one
partition), which keeps a burst's own cost small beside the bytes it holds. Two bursts of one key merge
(`absorb`) when a late event bridges them: counts add up, and the samples kept are the earliest and the
latest of both by event time.
"""

from __future__ import annotations

import sys
from typing import Any

from analysis.cache import OBJECT_BYTES
from analysis.event import MessageTally
from analysis.intake.quick_key import EventKey
from analysis.intake.tally import count_key, tally_messages

__all__ = ["TALLY_CHARS", "OpenBurst", "PartitionKey", "Position", "RawSample", "sample_charge"]

PartitionKey = tuple[str, int]
"""(topic, partition); aiokafka's TopicPartition is such a tuple."""
Position = tuple[PartitionKey, int]
"""Where a message came from: ((topic, partition), offset)."""
RawSample = tuple[bytes, int, float]
"""A sample candidate as received: (original message bytes, index of the record in it, event time).
Several records of one OTLP message share its bytes object."""

# Distinct commits kept per burst: a burst spanning more deploys than this is already unusual.
_MAX_COMMITS = 16
# Distinct messages counted as logged per burst; past that (an id in every message), new ones are counted
# by template (`_count_by_template`), up to as many templates again; the rest go uncounted.
_MAX_MESSAGES = 16
TALLY_CHARS = 512
"""The tally reads no further into a message than this (tally.py masks and templates its first 512)."""


def sample_charge(sample: RawSample) -> int:
    """What a sample is charged: its message's bytes (shared by the records of one batch, and charged to
    each, which errs on the safe side)."""
    return OBJECT_BYTES + len(sample[0])


class OpenBurst:
    """An open burst of one (server, tenant, fingerprint) key."""

    __slots__ = ("commits", "count", "first", "first_offset", "first_seen", "full", "head", "key",
                 "last_arrival", "last_commit", "last_offset", "last_seen", "last_wall", "message",
                 "message_count", "messages", "nbytes", "partitions", "tail", "tail_bytes", "tail_next",
                 "templates", "token", "tp")  # fmt: skip

    def __init__(self, token: int, key: tuple[str, str, str], sighting: EventKey, position: Position,
                 arrival: float) -> None:
        self.token = token
        self.key = key
        self.first = sighting
        self.first_seen = self.last_seen = sighting.timestamp
        self.last_arrival = arrival
        self.last_wall = 0.0
        self.full = False  # an event was refused for making it longer than max_length_s
        self.count = 0
        self.last_commit: str | None = None
        self.commits: dict[str, None] | None = None  # every commit, the last one seen last, from the 2nd on
        self.message = sighting.message[:TALLY_CHARS]
        self.message_count = 0
        self.nbytes = OBJECT_BYTES + sys.getsizeof(self.message)  # what the burst holds, samples included
        self.messages: dict[str, int] | None = None  # other messages, once there are any
        self.templates: dict[bytes, list[Any]] | None = None  # template -> [count, first message]
        self.head: list[RawSample] = []
        self.tail: list[RawSample] | None = None  # a ring once full; `tail_next` is its oldest entry
        self.tail_bytes: list[int] | None = None  # what each tail sample is charged, aligned with `tail`
        self.tail_next = 0
        self.tp, self.first_offset = position
        self.last_offset = self.first_offset
        self.partitions: dict[PartitionKey, list[int]] | None = None  # [first, last] of further partitions

    def count_message(self, message: str, times: int = 1) -> int:
        """Count `message` (cut to what the tally reads) `times` times; the bytes a newly kept one holds."""
        if message == self.message:
            self.message_count += times
            return 0
        messages = self.messages
        if messages is None:
            self.messages = {message: times}
            return OBJECT_BYTES + sys.getsizeof(message)
        seen = messages.get(message)
        if seen is not None:
            messages[message] = seen + times
        elif len(messages) < _MAX_MESSAGES - 1:
            messages[message] = times
            return OBJECT_BYTES + sys.getsizeof(message)
        else:
            return self._count_by_template(message, times)
        return 0

    def _count_by_template(self, message: str, times: int) -> int:
        """Count `message` under its template (`count_key`), a cheap stand-in for its masked form (no regex
        per event); returns the bytes a new template holds."""
        if self.templates is None:
            self.templates = {}
        key = count_key(message)
        entry = self.templates.get(key)
        if entry is not None:
            entry[0] += times
        elif len(self.templates) < _MAX_MESSAGES:
            self.templates[key] = [times, message]
            return 2 * OBJECT_BYTES + sys.getsizeof(key) + sys.getsizeof(message)
        return 0

    def count_commit(self, commit: str) -> None:
        """Keep `commit` once, as the last one seen (that is the commit analysis reads)."""
        if self.last_commit is None:
            self.last_commit = commit
            return
        commits = self.commits
        if commits is None:
            commits = self.commits = {self.last_commit: None}
        if commit in commits:
            del commits[commit]
        elif len(commits) >= _MAX_COMMITS:
            del commits[next(iter(commits))]
        commits[commit] = None
        self.last_commit = commit

    def count_old_commit(self, commit: str) -> None:
        """Keep the commit of an event older than the burst's newest: first, unless already known."""
        order = self.commit_order
        if commit not in order and len(order) < _MAX_COMMITS:
            self.commits = dict.fromkeys((commit, *order))
            self.last_commit = order[-1] if order else commit

    @property
    def commit_order(self) -> tuple[str, ...]:
        """The distinct commits, the last one seen last."""
        return tuple(self.commits) if self.commits else (self.last_commit,) if self.last_commit else ()

    def tally(self) -> tuple[MessageTally, ...]:
        """The burst's messages counted, most frequent first."""
        counts = {self.message: self.message_count} if self.message_count else {}
        for message, count in self._message_counts():
            counts[message] = counts.get(message, 0) + count
        return tally_messages(counts)

    def _message_counts(self) -> list[tuple[str, int]]:
        """Every (message, count) but the first message's, templates by their first message."""
        counted = list((self.messages or {}).items())
        counted += [(example, count) for count, example in (self.templates or {}).values()]
        return counted

    @property
    def samples(self) -> list[RawSample]:
        """The sample candidates, in the order they were kept: the head, then the tail oldest first."""
        tail = self.tail or []
        return [*self.head, *tail[self.tail_next:], *tail[:self.tail_next]]

    def spans(self) -> dict[PartitionKey, tuple[int, int]]:
        """The burst's first and last offset per partition."""
        spans = {self.tp: (self.first_offset, self.last_offset)}
        for tp, (first, last) in (self.partitions or {}).items():
            spans[tp] = (first, last)
        return spans

    def note_offset(self, position: Position) -> None:
        """Record where an event came from (offsets grow within a partition: first seen is the lowest)."""
        tp, offset = position
        if tp == self.tp:
            self.last_offset = max(self.last_offset, offset)
            self.first_offset = min(self.first_offset, offset)
        elif self.partitions is None:
            self.partitions = {tp: [offset, offset]}
        elif (span := self.partitions.get(tp)) is not None:
            span[0], span[1] = min(span[0], offset), max(span[1], offset)
        else:
            self.partitions[tp] = [offset, offset]

    def absorb(self, other: OpenBurst, head_size: int, tail_size: int) -> int:
        """Take `other`'s events into this burst (a late event joined them); returns the change in bytes
        held. Commits keep the order of the events' time: the later burst's come last."""
        earlier, later = (self, other) if self.first_seen <= other.first_seen else (other, self)
        before = self.nbytes + other.nbytes
        own = self.nbytes - sum(map(sample_charge, self.samples))
        self.count += other.count
        self.first = earlier.first
        self.first_seen = min(self.first_seen, other.first_seen)
        self.last_seen = max(self.last_seen, other.last_seen)
        self.last_arrival = max(self.last_arrival, other.last_arrival)
        self.last_wall = max(self.last_wall, other.last_wall)
        self.full = self.full or other.full
        commits = (*earlier.commit_order, *later.commit_order)
        self.last_commit, self.commits = None, None
        for commit in commits:
            self.count_commit(commit)
        if other.message_count:
            own += self.count_message(other.message, other.message_count)
        for message, count in other._message_counts():
            own += self.count_message(message, count)
        for tp, (first, last) in other.spans().items():
            self.note_offset((tp, first))
            self.note_offset((tp, last))
        kept = sorted((*self.samples, *other.samples), key=lambda sample: sample[2])
        self.head = kept[:head_size]
        tail = kept[head_size:][-tail_size:] if tail_size else []
        self.tail, self.tail_bytes = (tail, [sample_charge(s) for s in tail]) if tail else (None, None)
        self.tail_next = 0
        self.nbytes = own + sum(map(sample_charge, self.samples))
        return self.nbytes - before
