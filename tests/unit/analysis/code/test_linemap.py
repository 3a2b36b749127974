"""Mapping a line of a file at one commit to the same code at another, through their -U0 hunks."""

from __future__ import annotations

from pathlib import Path

from analysis.code.linemap import Hunk, file_hunks, map_line
from tests.gitrepo import GitRepo


class TestMapLine:
    def test_lines_before_a_change_stay_and_lines_after_shift(self) -> None:
        """Two lines became five at 3-4: line 2 stays, line 10 moves down by three."""
        hunks = [Hunk(3, 2, 3, 5)]
        assert map_line(hunks, 2) == 2
        assert map_line(hunks, 10) == 13

    def test_a_changed_or_deleted_line_has_no_counterpart(self) -> None:
        """A line inside a replaced or deleted range maps to nothing: it is not the same code any more."""
        assert map_line([Hunk(3, 2, 3, 5)], 4) is None
        assert map_line([Hunk(7, 1, 6, 0)], 7) is None

    def test_insertions_and_deletions_add_up(self) -> None:
        """Three lines inserted after line 1 and one deleted at 5: line 9 lands at 11."""
        hunks = [Hunk(5, 1, 7, 0), Hunk(1, 0, 2, 3)]
        assert map_line(hunks, 1) == 1
        assert map_line(hunks, 9) == 11


class TestFileHunks:
    def test_hunks_come_from_the_real_diff(self, tmp_path: Path) -> None:
        """Between two real commits, the mapped line holds the same text; a missing file gives None."""
        repo = GitRepo(tmp_path / "repo")
        old_text = "".join(f"line {n}\n" for n in range(1, 21))
        old = repo.commit("first", {"a.py": old_text})
        new_lines = old_text.splitlines()
        new_lines[4:4] = ["added 1", "added 2"]  # two lines inserted before line 5
        del new_lines[15]  # and one further down removed
        new = repo.commit("second", {"a.py": "\n".join(new_lines) + "\n"})
        hunks = file_hunks(repo.path / ".git", "a.py", old, new)
        assert hunks is not None
        for line in (3, 7, 12, 20):
            mapped = map_line(hunks, line)
            assert mapped is not None and new_lines[mapped - 1] == f"line {line}"
        assert file_hunks(repo.path / ".git", "gone.py", old, new) is None
        assert file_hunks(repo.path / ".git", "a.py", old, old) == []
