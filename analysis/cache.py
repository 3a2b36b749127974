"""Memo tables bounded in bytes as well as in entries, for every cache on the intake path.

A count alone bounds nothing when entries are as large as the input allows: 4,096 cached texts of a
megabyte each is 4 GiB. Each `BoundedCache` is charged, per entry, the bytes its caller estimates the
entry keeps alive (strings by `sys.getsizeof`, objects by a fixed overhead each), and drops its oldest
entries until both bounds hold. Every cache registers itself, so `cache_bytes()` reports them all.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable, Hashable
from functools import wraps
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

OBJECT_BYTES = 200
"""What one small object (a frame, a tuple of a few fields) costs, strings apart: a generous round figure."""

_LARGEST_ENTRY_SHIFT = 3  # an entry over 1/8 of the budget is not kept: one value cannot flush the table
_MISSING = object()
_CACHES: weakref.WeakSet[BoundedCache[object, object]] = weakref.WeakSet()


class BoundedCache(Generic[K, V]):
    """A memo table of at most `max_entries` entries and `max_bytes` bytes, as its callers charge them.

    `get` is the underlying dict's own method, so a lookup costs what a bare dict lookup costs. First in,
    first out: a burst's entries are hot while it lasts, and an entry that stays hot longer (a frame every
    trace shares) is made again once per turn of the table, which costs less than keeping a hit order.
    Safe to share between threads (an analysis thread pool shares one redactor): `put` holds a lock, and
    a `get` meanwhile sees the entry or not.
    """

    __slots__ = ("__weakref__", "_data", "_lock", "_sizes", "get", "max_bytes", "max_entries", "name", "nbytes")

    def __init__(self, name: str, max_entries: int, max_bytes: int) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("a cache needs room for at least one entry and one byte")
        self.name = name
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._data: dict[K, V] = {}  # insertion-ordered: its first keys are the oldest
        self._sizes: dict[K, int] = {}
        self._lock = threading.Lock()
        self.get = self._data.get
        _CACHES.add(self)  # type: ignore[arg-type]  # the registry holds caches of any key and value type

    def put(self, key: K, value: V, nbytes: int) -> V:
        """Remember `value` under `key`, charged `nbytes`; returns `value` (so a miss reads `x = put(...)`)."""
        if nbytes > self.max_bytes >> _LARGEST_ENTRY_SHIFT:
            return value  # one value that large would flush the table: not kept
        sizes = self._sizes
        with self._lock:
            total = self.nbytes + nbytes
            old = sizes.get(key)
            if old is not None:
                total -= old
                del self._data[key]
            self._data[key] = value
            sizes[key] = nbytes
            self.nbytes = total
            if total > self.max_bytes or len(sizes) > self.max_entries:
                self._evict()
        return value

    def _evict(self) -> None:
        """Drop the oldest entries until both bounds hold with a sixteenth to spare, so that a full table
        evicts in batches rather than on every insert."""
        data, sizes = self._data, self._sizes
        bytes_to = self.max_bytes - (self.max_bytes >> 4)
        entries_to = self.max_entries - (self.max_entries >> 4)
        total, count, gone = self.nbytes, len(sizes), []
        # One walk from the front per batch: a dict's first keys after deletions cost a scan of the holes
        # they left, paid once per batch here, not once per insert.
        for oldest in data:
            if total <= bytes_to and count <= entries_to:
                break
            total -= sizes[oldest]
            count -= 1
            gone.append(oldest)
        for oldest in gone:
            del data[oldest]
            del sizes[oldest]
        self.nbytes = total

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._data.clear()
            self._sizes.clear()
            self.nbytes = 0

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data


def memoize(name: str, max_entries: int, max_bytes: int) -> Callable[[Callable[..., V]], Callable[..., V]]:
    """`functools.lru_cache` for a parser of text arguments, bounded in bytes too (and first in, first out,
    as `BoundedCache` is). An entry is charged
    twice its arguments' size plus one object: the result is made of the arguments' characters. The
    cache is the wrapper's `cache` attribute."""

    def decorate(function: Callable[..., V]) -> Callable[..., V]:
        cache: BoundedCache[Any, V] = BoundedCache(name, max_entries, max_bytes)
        get, put, size = cache.get, cache.put, sys.getsizeof

        def one(arg: str) -> V:  # the usual parser of a line: keyed by the line itself, no tuple to build
            value = get(arg, _MISSING)
            if value is _MISSING:
                return put(arg, function(arg), 2 * size(arg) + OBJECT_BYTES)
            return value  # type: ignore[return-value]  # not _MISSING, so a V put there earlier

        def many(*args: str) -> V:
            value = get(args, _MISSING)
            if value is _MISSING:
                return put(args, function(*args), 2 * sum(map(size, args)) + OBJECT_BYTES)
            return value  # type: ignore[return-value]  # as above

        cached = wraps(function)(one if function.__code__.co_argcount == 1 else many)
        cached.cache = cache  # type: ignore[attr-defined]  # for cache_bytes() and tests
        return cached

    return decorate


def text_bytes(text: str | bytes) -> int:
    """Bytes a string holds (1, 2 or 4 per character, by its widest one, plus its header)."""
    return sys.getsizeof(text)


def cache_bytes() -> dict[str, tuple[int, int]]:
    """Every live cache by name: (bytes charged, byte budget). Caches of one name are summed."""
    report: dict[str, tuple[int, int]] = {}
    for cache in list(_CACHES):
        used, budget = report.get(cache.name, (0, 0))
        report[cache.name] = (used + cache.nbytes, budget + cache.max_bytes)
    return report
