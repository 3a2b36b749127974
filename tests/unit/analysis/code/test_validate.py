"""Report validation against git objects, and stale-citation detection between commits."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.code.repo import Checkout
from analysis.code.validate import (
    citation_changed,
    normalise_path,
    validate_citations,
    validate_fix,
    validate_location,
)
from analysis.report import CitationRef, Fix, Location
from tests.gitrepo import GitRepo, git

TEN_LINES = "".join(f"line {i}\n" for i in range(1, 11))


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "repo")
    repo.commit("one", {"src/a.py": TEN_LINES, "src/b.py": "def f():\n    return None\n"})
    return repo


def checkout_of(repo: GitRepo) -> Checkout:
    return Checkout(root=repo.path, commit=repo.head(), repo_dir=repo.path / ".git")


class TestNormalisePath:
    """Paths are made repo-relative or rejected."""

    def test_cleans_relative_paths(self) -> None:
        """./ and inner .. that stay inside are folded away."""
        assert normalise_path("./src/x/../a.py") == "src/a.py"

    def test_rejects_escaping_absolute_and_git_paths(self) -> None:
        """Escaping, absolute (outside the root), .git, NUL and empty paths are rejected."""
        for bad in ("../a.py", "src/../../a.py", "/etc/passwd", ".git/config", "a\x00b", "", "."):
            assert normalise_path(bad, Path("/srv/repo")) is None, bad

    def test_absolute_path_under_the_root_becomes_relative(self, tmp_path: Path) -> None:
        """A model echoing the full checkout path gets it made relative."""
        assert normalise_path(f"{tmp_path}/src/a.py", tmp_path) == "src/a.py"
        assert normalise_path(f"{tmp_path}-evil/src/a.py", tmp_path) is None


class TestValidateCitations:
    """Citations must exist at the commit, inside the file, and (when asked) have been read."""

    def test_keeps_valid_citation_with_commit_and_blob(self, repo: GitRepo) -> None:
        """A valid citation is pinned to the commit and the blob sha git has for the file."""
        kept, dropped = validate_citations([CitationRef(path="./src/a.py", start_line=2, end_line=4)],
                                           checkout_of(repo))
        assert dropped == []
        assert len(kept) == 1
        assert kept[0].path == "src/a.py"
        assert kept[0].commit == repo.head()
        assert kept[0].blob_sha == git(repo.path, "rev-parse", "HEAD:src/a.py")

    def test_drops_invented_and_out_of_range_and_escaping(self, repo: GitRepo) -> None:
        """Missing files, lines past the end, reversed ranges and escaping paths are dropped with reasons."""
        refs = [CitationRef(path="src/invented.py", start_line=1, end_line=1),
                CitationRef(path="src/a.py", start_line=9, end_line=11),
                CitationRef(path="src/a.py", start_line=5, end_line=4),
                CitationRef(path="../etc/passwd", start_line=1, end_line=1)]
        kept, dropped = validate_citations(refs, checkout_of(repo))
        assert kept == []
        assert len(dropped) == 4
        assert "no such file" in dropped[0]
        assert "outside the file" in dropped[1]
        assert "not a path inside" in dropped[3]

    def test_drops_files_never_read(self, repo: GitRepo) -> None:
        """With files_read given, a citation of a file the agent never read is dropped."""
        refs = [CitationRef(path="src/a.py", start_line=1, end_line=1),
                CitationRef(path="src/b.py", start_line=1, end_line=2)]
        kept, dropped = validate_citations(refs, checkout_of(repo), files_read={"src/b.py"})
        assert [c.path for c in kept] == ["src/b.py"]
        assert dropped == ["src/a.py: cited but never read"]

    def test_uses_the_commit_not_the_working_tree(self, repo: GitRepo) -> None:
        """A file that only exists uncommitted in the working tree is not citable."""
        (repo.path / "src/new.py").write_text("x = 1\n")
        kept, dropped = validate_citations([CitationRef(path="src/new.py", start_line=1, end_line=1)],
                                           checkout_of(repo))
        assert kept == [] and len(dropped) == 1

    def test_duplicates_kept_once(self, repo: GitRepo) -> None:
        """The same citation twice is kept once."""
        ref = CitationRef(path="src/a.py", start_line=1, end_line=2)
        kept, _ = validate_citations([ref, ref], checkout_of(repo))
        assert len(kept) == 1


class TestValidateLocationAndFix:
    """Culprit locations and fixes are checked against the commit."""

    def test_location(self, repo: GitRepo) -> None:
        """A location inside the file passes (path normalised); a line past the end does not."""
        ok, why = validate_location(Location(path="src//a.py", line=10), checkout_of(repo))
        assert ok is not None and ok.path == "src/a.py" and why is None
        bad, why = validate_location(Location(path="src/a.py", line=11), checkout_of(repo))
        assert bad is None and why is not None and "outside" in why

    def test_fix_before_text_must_exist(self, repo: GitRepo) -> None:
        """A fix is kept when its before-code is in the file (re-indented is fine), dropped otherwise."""
        good = Fix(path="src/b.py", before="return   None", after="return 0")
        kept, note = validate_fix(good, checkout_of(repo))
        assert kept == good and note is None
        bad = Fix(path="src/b.py", before="return self.cache[key]", after="...")
        kept, note = validate_fix(bad, checkout_of(repo))
        assert kept is None and note is not None and "not in src/b.py" in note


class TestCitationChanged:
    """Stale citations: did the cited lines change between two commits?"""

    def test_unchanged_when_other_lines_change(self, repo: GitRepo) -> None:
        """Editing line 9 leaves a citation of lines 2-4 intact."""
        old = repo.head()
        new = repo.commit("edit 9", {"src/a.py": TEN_LINES.replace("line 9\n", "line nine\n")})
        assert citation_changed(repo.path / ".git", "src/a.py", 2, 4, old, new) is False
        assert citation_changed(repo.path / ".git", "src/a.py", 8, 9, old, new) is True

    def test_identical_blob_is_unchanged(self, repo: GitRepo) -> None:
        """A commit that does not touch the file changes nothing."""
        old = repo.head()
        new = repo.commit("other", {"src/b.py": "def f():\n    return 1\n"})
        assert citation_changed(repo.path / ".git", "src/a.py", 1, 10, old, new) is False

    def test_insertion_inside_the_range_is_a_change(self, repo: GitRepo) -> None:
        """Inserting a line between cited lines 3 and 4 changes the citation; inserting after 4 does not."""
        old = repo.head()
        inside = repo.commit("insert", {"src/a.py": TEN_LINES.replace("line 3\n", "line 3\nnew\n")})
        assert citation_changed(repo.path / ".git", "src/a.py", 2, 4, old, inside) is True
        assert citation_changed(repo.path / ".git", "src/a.py", 5, 6, old, inside) is False

    def test_deleted_file_and_unknown_commit_count_as_changed(self, repo: GitRepo) -> None:
        """A file gone at the new commit, or an unknown commit, cannot be trusted: changed."""
        old = repo.head()
        (repo.path / "src/a.py").unlink()
        new = repo.commit("delete")
        assert citation_changed(repo.path / ".git", "src/a.py", 1, 2, old, new) is True
        assert citation_changed(repo.path / ".git", "src/b.py", 1, 2, "0" * 40, new) is True
