"""`kept_lines`: what `logagent demo --keep` says it left, and the commands it suggests, from what is there."""

from __future__ import annotations

from pathlib import Path

from demo.report import analyses_line, dlq_line, kept_lines


def _keep(root: Path, *names: str) -> Path:
    """`root` with these entries: a file for `events.jsonl`, a directory for the others."""
    for name in names:
        if name.endswith(".jsonl"):
            (root / name).touch()
        else:
            (root / name).mkdir()
    return root


class TestKeptLines:
    def test_a_full_run_names_everything_and_suggests_the_next_commands(self, tmp_path: Path) -> None:
        keep = _keep(tmp_path, "samples", "cache", "events", "events.jsonl", "memory")
        event = keep / "events" / "orders-service--unknown-coupon.json"
        lines = kept_lines(keep, {"orders-service--unknown-coupon": event})
        assert lines[1] == (f"Kept in {keep}: the sample repositories (samples/), their checkouts (cache/), one event "
                            "per failure (events/), every well-formed message produced, one per line (events.jsonl), "
                            "and the memory (memory/). Next:")
        assert lines[2:] == [f"  logagent analyze --repo {keep / 'samples' / 'orders-service'} --event {event}",
                             f"  LOGAGENT_DATA_DIR={keep} logagent memory servers",
                             f"  LOGAGENT_DATA_DIR={keep} logagent memory list"]

    def test_a_run_that_timed_out_before_any_analysis_names_no_memory(self, tmp_path: Path) -> None:
        """No memory/ nor cache/ yet: neither is named, no memory command is suggested."""
        keep = _keep(tmp_path, "samples", "events", "events.jsonl")
        event = keep / "events" / "orders-service--unknown-coupon.json"
        lines = kept_lines(keep, {"orders-service--unknown-coupon": event})
        assert "memory" not in "\n".join(lines) and "cache" not in lines[1]
        assert lines[1].endswith("and every well-formed message produced, one per line (events.jsonl). Next:")
        assert len(lines) == 3 and lines[2].startswith("  logagent analyze --repo ")

    def test_nothing_kept_says_nothing(self, tmp_path: Path) -> None:
        assert kept_lines(tmp_path, {}) == []
        assert kept_lines(_keep(tmp_path, "events"), {}) == ["",
                                                            f"Kept in {tmp_path}: one event per failure (events/)."]


class TestTotals:
    def test_counts_by_kind_after_the_total(self) -> None:
        assert dlq_line(["not_json", "too_large", "not_json"]) == "  DLQ        3: not_json 2, too_large 1"
        assert analyses_line([]) == "  analyses   0"

    def test_nothing_is_the_total_alone(self) -> None:
        """A run that timed out before any analysis printed `analyses   0: ` (a trial)."""
        assert dlq_line([]) == "  DLQ        0"
