"""BoundedCache and memoize: bounded in entries and in bytes, oldest entries first out."""

from __future__ import annotations

import pytest

from analysis.cache import BoundedCache, cache_bytes, memoize


class TestBoundedCache:
    def test_a_full_cache_drops_its_oldest_entries_first(self) -> None:
        """Past `max_entries`, the oldest entries go, in the order they came (a sixteenth at a time)."""
        cache: BoundedCache[int, int] = BoundedCache("test.entries", 100, 1 << 20)
        for key in range(110):
            cache.put(key, key * 2, 10)
            assert len(cache) <= 100
        kept = [key for key in range(110) if key in cache]
        assert kept == list(range(110 - len(kept), 110)) and len(kept) >= 90 and cache.get(109) == 218

    def test_bytes_bound_the_cache_whatever_the_count(self) -> None:
        """Large entries evict the oldest until the charged bytes fit the budget again."""
        cache: BoundedCache[int, str] = BoundedCache("test.bytes", 1000, 1000)
        for key in range(50):
            cache.put(key, "v", 100)
            assert cache.nbytes <= 1000
        kept = [key for key in range(50) if key in cache]
        assert kept == list(range(50 - len(kept), 50)) and cache.nbytes == 100 * len(kept) and len(kept) >= 9

    def test_an_entry_too_large_for_its_share_is_not_kept(self) -> None:
        """One huge value cannot flush the table: past an eighth of the budget it is returned, not stored."""
        cache: BoundedCache[str, str] = BoundedCache("test.share", 10, 800)
        cache.put("small", "s", 50)
        assert cache.put("huge", "h", 101) == "h"
        assert "huge" not in cache and "small" in cache and cache.nbytes == 50

    def test_putting_a_key_again_replaces_its_charge(self) -> None:
        """A re-put key is charged once, at its new size."""
        cache: BoundedCache[str, int] = BoundedCache("test.reput", 10, 1000)
        cache.put("k", 1, 80)
        cache.put("k", 2, 30)
        assert cache.get("k") == 2 and cache.nbytes == 30 and len(cache) == 1

    def test_needs_room(self) -> None:
        """A cache without room for one entry is a configuration mistake."""
        with pytest.raises(ValueError, match="at least one"):
            BoundedCache("test.none", 0, 10)


class TestMemoize:
    def test_calls_once_per_argument_and_bounds_bytes(self) -> None:
        """A repeated argument is answered from the cache; long arguments fill the byte budget, not more."""
        calls: list[str] = []

        @memoize("test.memo", 1000, 64 * 1024)
        def parse(line: str) -> int:
            calls.append(line)
            return len(line)

        assert parse("abc") == 3 and parse("abc") == 3 and calls == ["abc"]
        for i in range(200):
            parse(f"{i:04d}" + "x" * 1000)
        cache = parse.cache  # type: ignore[attr-defined]
        assert cache.nbytes <= 64 * 1024 and len(cache) < 200
        used, budget = cache_bytes()["test.memo"]
        assert used == cache.nbytes and budget == 64 * 1024
