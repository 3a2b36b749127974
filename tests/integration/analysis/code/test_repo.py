"""RepoSync and open_local against real repositories: clone, fetch, rate limit, fallbacks, token hygiene."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from analysis.code.filemap import FileIndex
from analysis.code.gitlog import blame_lines
from analysis.code.jail import tracked_only
from analysis.code.repo import (
    RepoConfig,
    RepoError,
    RepoSpec,
    RepoSync,
    RepoUnavailable,
    _safe_revision,
    not_in_commit_note,
    open_local,
)
from analysis.code.tools import FileTools
from tests.gitrepo import GitRepo, git

pytestmark = pytest.mark.integration

TOKEN = "ghp_SuperSecretToken1234567890"


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def upstream(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "upstream")
    repo.commit("v1", {"app.py": "VERSION = 1\n"})
    return repo


def make_sync(tmp_path: Path, spec: RepoSpec, clock: Callable[[], float] | None = None,
              environ: dict[str, str] | None = None, **config: object) -> RepoSync:
    cfg = RepoConfig(cache_dir=tmp_path / "cache", servers={"orders": spec}, **config)
    return RepoSync(cfg, environ=environ or {}, clock=clock or FakeClock())


class TestCheckout:
    """Checkouts at the deployed commit."""

    def test_clone_and_checkout_branch_head(self, tmp_path: Path, upstream: GitRepo) -> None:
        """Without a commit, the branch head is checked out from a clone of a local-path URL."""
        sync = make_sync(tmp_path, RepoSpec(url=str(upstream.path)))
        checkout = sync.checkout("orders", None)
        assert checkout.commit == upstream.head()
        assert (checkout.root / "app.py").read_text() == "VERSION = 1\n"
        assert checkout.notes == ()
        assert (checkout.repo_dir / "HEAD").exists()

    def test_old_commit_reads_old_content(self, tmp_path: Path, upstream: GitRepo) -> None:
        """A checkout at an older commit shows that commit's files, next to one at the newer commit."""
        old = upstream.head()
        new = upstream.commit("v2", {"app.py": "VERSION = 2\n"})
        sync = make_sync(tmp_path, RepoSpec(url=str(upstream.path)))
        at_new = sync.checkout("orders", new)
        at_old = sync.checkout("orders", old[:10])
        assert at_old.commit == old
        assert at_old.requested == old[:10]
        assert (at_old.root / "app.py").read_text() == "VERSION = 1\n"
        assert (at_new.root / "app.py").read_text() == "VERSION = 2\n"
        assert sync.checkout("orders", old).root == at_old.root  # the worktree is reused

    def test_a_relative_cache_dir_checks_out_beside_the_clone_not_inside_it(
        self, tmp_path: Path, upstream: GitRepo, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The default data dir (`./.data`) is relative, and git runs inside each clone: worktrees at two
        commits, and the same commit asked again, all land under the cache dir the service was started in."""
        old = upstream.head()
        new = upstream.commit("v2", {"app.py": "VERSION = 2\n"})
        monkeypatch.chdir(tmp_path)
        sync = RepoSync(RepoConfig(cache_dir=Path("rel/repos"), servers={"orders": RepoSpec(url=str(upstream.path))}),
                        environ={}, clock=FakeClock())
        at_new, at_old = sync.checkout("orders", new), sync.checkout("orders", old)
        assert (at_old.root / "app.py").read_text() == "VERSION = 1\n"
        assert (at_new.root / "app.py").read_text() == "VERSION = 2\n"
        assert sync.checkout("orders", old).root == at_old.root
        for root in (at_new.root, at_old.root):
            assert root.is_relative_to(tmp_path / "rel" / "repos" / "worktrees"), root

    def test_unknown_commit_falls_back_to_branch_head_with_a_note(self, tmp_path: Path,
                                                                  upstream: GitRepo) -> None:
        """An unknown commit is fetched for; when still missing the branch head is used and noted."""
        sync = make_sync(tmp_path, RepoSpec(url=str(upstream.path)))
        checkout = sync.checkout("orders", "deadbeef" * 5)
        assert checkout.commit == upstream.head()
        assert any("not found; used branch head" in n for n in checkout.notes)

    def test_the_default_branch_stands_in_for_main_without_a_note_unless_a_branch_was_set(
            self, tmp_path: Path, upstream: GitRepo) -> None:
        """A trial's repository whose default branch is `master` read "branch 'main' not found" though no
        branch was configured (`main` is only the default's guess); a branch configured and missing is said."""
        git(upstream.path, "branch", "-m", "trunk")
        unset = make_sync(tmp_path / "unset", RepoSpec(url=str(upstream.path))).checkout("orders", None)
        assert unset.commit == upstream.head() and unset.notes == ()
        named = make_sync(tmp_path / "named", RepoSpec(url=str(upstream.path), branch="main")).checkout("orders", None)
        assert named.commit == upstream.head() and named.notes == ("branch 'main' not found; used the default branch",)

    def test_unsafe_revision_is_not_passed_to_git(self, tmp_path: Path, upstream: GitRepo) -> None:
        """A revision that looks like an option is refused and the head used instead."""
        sync = make_sync(tmp_path, RepoSpec(url=str(upstream.path)))
        checkout = sync.checkout("orders", "--output=/tmp/pwned")
        assert checkout.commit == upstream.head()
        assert any("not a usable git revision" in n for n in checkout.notes)

    def test_new_commit_is_fetched_and_lag_recorded_once(self, tmp_path: Path, upstream: GitRepo) -> None:
        """A commit pushed after the clone is fetched once the interval allows; its lag is reported once."""
        clock = FakeClock()
        sync = make_sync(tmp_path, RepoSpec(url=str(upstream.path)), clock=clock, fetch_min_interval_s=60)
        sync.checkout("orders", None)
        new = upstream.commit("v2", {"app.py": "VERSION = 2\n"})
        clock.now += 5
        early = sync.checkout("orders", new)
        assert early.commit != new
        assert any("rate-limited" in n for n in early.notes)
        clock.now += 60
        later = sync.checkout("orders", new)
        assert later.commit == new
        assert later.became_local_after_s == pytest.approx(60.0)
        assert sync.checkout("orders", new).became_local_after_s is None

    def test_a_commit_fetched_on_request_reports_the_fetch_as_its_lag(self, tmp_path: Path,
                                                                      upstream: GitRepo) -> None:
        """A commit the first request fetches was not local when asked for: its lag is the fetch's time, not 0
        (which read as "already local" on the dashboard)."""
        sync = make_sync(tmp_path, RepoSpec(url=str(upstream.path)), clock=time.monotonic, fetch_min_interval_s=0)
        sync.checkout("orders", None)
        new = upstream.commit("v2", {"app.py": "VERSION = 2\n"})
        checkout = sync.checkout("orders", new)
        assert checkout.commit == new and checkout.became_local_after_s is not None
        assert checkout.became_local_after_s > 0

    def test_commit_already_local_reports_zero_lag(self, tmp_path: Path, upstream: GitRepo) -> None:
        """A commit that is local on first request reports 0 lag."""
        sync = make_sync(tmp_path, RepoSpec(url=str(upstream.path)))
        assert sync.checkout("orders", upstream.head()).became_local_after_s == 0.0

    def test_unconfigured_server_raises(self, tmp_path: Path, upstream: GitRepo) -> None:
        """A server without a repository is an error the pipeline can turn into a note."""
        with pytest.raises(RepoError):
            make_sync(tmp_path, RepoSpec(url=str(upstream.path))).checkout("billing", None)

    def test_worktrees_pruned_beyond_cap(self, tmp_path: Path, upstream: GitRepo) -> None:
        """Only max_worktrees worktrees are kept per server; the least recently used go, once no analysis
        may still read them (handed out over 15 minutes ago)."""
        shas = [upstream.head()]
        shas += [upstream.commit(f"v{i}", {"app.py": f"VERSION = {i}\n"}) for i in (2, 3, 4)]
        sync = make_sync(tmp_path, RepoSpec(url=str(upstream.path)), max_worktrees=2)
        roots = []
        for sha in shas:
            roots.append(sync.checkout("orders", sha).root)
            aged = time.time() - 3600
            os.utime(roots[-1], (aged, aged))  # its analysis is long over
        assert [r.exists() for r in roots] == [False, False, True, True]
        listed = git(sync.repo_dir("orders"), "worktree", "list")
        assert shas[0] not in listed and shas[3] in listed

    def test_a_worktree_an_analysis_may_still_read_is_never_evicted(self, tmp_path: Path, upstream: GitRepo) -> None:
        """Checkouts of more commits than the cap within minutes (a log naming commits at will, attacker
        review) deleted the worktree an analysis was reading: recent ones stay, over the cap."""
        shas = [upstream.head()]
        shas += [upstream.commit(f"v{i}", {"app.py": f"VERSION = {i}\n"}) for i in (2, 3, 4, 5, 6)]
        sync = make_sync(tmp_path, RepoSpec(url=str(upstream.path)), max_worktrees=2)
        roots = [sync.checkout("orders", sha).root for sha in shas[:4]]
        assert all(root.exists() for root in roots)
        # Past twice the cap the least recent go all the same: a stream of commits cannot fill the disk.
        roots += [sync.checkout("orders", sha).root for sha in shas[4:]]
        assert [root.exists() for root in roots] == [False, False, True, True, True, True]

    @pytest.mark.parametrize("prefix_digits", [4, 6])
    def test_a_short_hex_prefix_names_no_commit(self, tmp_path: Path, upstream: GitRepo, prefix_digits: int) -> None:
        """A log's commit of 4-6 hex digits could be any commit of the history (guessing reached old ones, a
        checkout each), also as `git describe` writes it (`x-1-gd260`): git's 7 digits at least, or a name."""
        old = upstream.head()
        head = upstream.commit("v2", {"app.py": "VERSION = 2\n"})
        sync = make_sync(tmp_path, RepoSpec(url=str(upstream.path)))
        assert sync.checkout("orders", old[:prefix_digits]).commit == head  # not found: the branch's head
        assert sync.checkout("orders", f"v1.0-3-g{old[:prefix_digits]}").commit == head  # `git describe`'s form
        assert sync.checkout("orders", old[:7]).commit == old
        assert _safe_revision("build-gcc") and _safe_revision("v1.2.3-gfe")  # git reads 4 digits at least there

    def test_a_clone_that_lost_the_race_to_another_replica_uses_the_winners(self, tmp_path: Path,
                                                                            upstream: GitRepo) -> None:
        """Two replicas sharing one cache both clone a server they found missing: the second rename finds the
        first's clone in place, and its checkout reads that clone instead of failing."""
        spec = RepoSpec(url=str(upstream.path))
        first, second = make_sync(tmp_path, spec), make_sync(tmp_path, spec)
        first.checkout("orders", None)
        second._clone("orders", spec, None)  # its clone finished after the first's rename
        checkout = second.checkout("orders", upstream.head())
        assert (checkout.root / "app.py").read_text() == "VERSION = 1\n"
        assert [p.name for p in checkout.repo_dir.parent.iterdir() if p.name.startswith(".clone-")] == []


def _plant(place: Path, kind: str, outside: Path) -> None:
    """Put something that is no clone made here at `place`."""
    place.parent.mkdir(parents=True, exist_ok=True)
    if kind == "a directory of files":
        place.mkdir()
        (place / "notes.txt").write_text("not a repository")
    elif kind == "a directory with a HEAD":
        place.mkdir()
        (place / "HEAD").write_text("ref: refs/heads/main\n")
    elif kind == "a file":
        place.write_text("not a repository")
    elif kind == "a bare repository":
        git(place.parent, "init", "--quiet", "--bare", place.name)
    elif kind == "a clone with a command in its config":
        git(place.parent, "clone", "--quiet", "--bare", str(outside), place.name)
        git(place, "config", "remote.origin.fetch", "+refs/heads/*:refs/heads/*")
        git(place, "config", "Core.sshCommand", f"touch {place.parent / 'ran'}")
    elif kind == "a clone with a key on its section's line":  # read by git, not by every config parser
        git(place.parent, "clone", "--quiet", "--bare", str(outside), place.name)
        git(place, "config", "remote.origin.fetch", "+refs/heads/*:refs/heads/*")
        (place / "attrs").write_text("* filter=x\n")
        with (place / "config").open("a") as config:
            config.write(f"[core] attributesFile = {place / 'attrs'}\n"
                         f"[filter \"x\"] smudge = \"sh -c 'touch {place.parent / 'ran'}; cat'\"\n")
    else:  # a symlink to a clone outside the cache
        place.symlink_to(outside)


class TestCacheHoldsOnlyItsClones:
    """What is in the cache in place of a clone is replaced, never read or followed (attacker review: a
    planted directory gave raw errors, and a symlink out of the cache was used)."""

    @pytest.mark.parametrize("kind", ["a directory of files", "a directory with a HEAD", "a file",
                                      "a bare repository", "a clone with a command in its config",
                                      "a clone with a key on its section's line", "a symlink"])
    def test_what_is_no_clone_made_here_is_replaced_by_a_fresh_clone(self, kind: str, tmp_path: Path,
                                                                     upstream: GitRepo) -> None:
        """The checkout reads a fresh clone and says so; a symlink is removed and what it pointed to is left as
        it was (no worktree was added to it)."""
        outside = tmp_path / "outside.git"
        git(tmp_path, "clone", "--quiet", "--bare", str(upstream.path), outside.name)
        sync = make_sync(tmp_path, RepoSpec(url=str(upstream.path)))
        _plant(sync.repo_dir("orders"), kind, outside)
        checkout = sync.checkout("orders", None)
        assert (checkout.root / "app.py").read_text() == "VERSION = 1\n"
        assert checkout.notes == ("the repository cache held something other than a clone made here; cloned afresh",)
        assert not checkout.repo_dir.is_symlink() and checkout.repo_dir.resolve().is_relative_to(tmp_path / "cache")
        assert not (outside / "worktrees").exists() and not (checkout.repo_dir.parent / "ran").exists()
        assert sync.checkout("orders", None).notes == ()

    def test_a_symlink_among_the_worktrees_is_not_followed(self, tmp_path: Path, upstream: GitRepo) -> None:
        """The server's worktree folder replaced by a symlink to a look-alike outside the cache: the checkout
        is made in the cache again, and the look-alike is neither read nor changed."""
        sync = make_sync(tmp_path, RepoSpec(url=str(upstream.path)))
        root = sync.checkout("orders", None).root
        fake = tmp_path / "elsewhere" / root.name
        fake.mkdir(parents=True)
        (fake / ".git").write_text("gitdir: /nowhere\n")
        (fake / "app.py").write_text("VERSION = 666\n")
        shutil.rmtree(root.parent)
        root.parent.symlink_to(fake.parent)
        checkout = sync.checkout("orders", None)
        assert checkout.root == root and not root.parent.is_symlink()
        assert (checkout.root / "app.py").read_text() == "VERSION = 1\n"
        assert (fake / "app.py").read_text() == "VERSION = 666\n"


def _plant_programs(repo: GitRepo, driver: str, tmp_path: Path) -> Path:
    """The clean, smudge and textconv of `driver` in the repository's config, each writing its key to the file
    returned when it runs."""
    ran = tmp_path / "ran"
    for key in (f"filter.{driver}.clean", f"filter.{driver}.smudge", f"diff.{driver}.textconv"):
        git(repo.path, "config", key, f"sh -c 'echo {key} >> {ran}; cat \"$1\"' -- ")
    return ran


def _read_every_way(repo: GitRepo, head: str, tmp_path: Path) -> None:
    """What `logagent analyze --repo` reads of `app.py` (1 line at `head`): a change to it in the working tree
    (stat says changed, so git reads it again, through `clean`), a worktree at `head`, a blame there."""
    os.utime(repo.path / "app.py", (0, 0))
    (repo.path / "app.py").write_text("VERSION = 2\n")
    assert "app.py" in open_local(repo.path).modified
    at_head = open_local(repo.path, head, cache_dir=tmp_path / "wt")
    assert (at_head.root / "app.py").read_text() == "VERSION = 1\n"
    assert [line.line for line in blame_lines(at_head.repo_dir, head, "app.py", 1, 1, 5.0)] == [1]


class TestNothingPlantedRuns:
    """Attacker review: a hook planted in a cached clone ran at the next checkout, and any directory with a
    `.git` file at a worktree's place was read as the checkout."""

    def test_a_planted_hook_does_not_run(self, tmp_path: Path, upstream: GitRepo) -> None:
        """Hooks in the clone (and in a local repository) are never run by a checkout or a fetch."""
        old, clock = upstream.head(), FakeClock()
        sync = make_sync(tmp_path, RepoSpec(url=str(upstream.path)), clock=clock)
        repo_dir = sync.checkout("orders", None).repo_dir
        new = upstream.commit("v2", {"app.py": "VERSION = 2\n"})
        ran = tmp_path / "ran"
        for where in (repo_dir / "hooks", upstream.path / ".git" / "hooks"):
            for hook in ("post-checkout", "reference-transaction", "post-index-change"):
                (where / hook).write_text(f"#!/bin/sh\necho {hook} >> {ran}\n")
                (where / hook).chmod(0o755)
        clock.now += 3600
        assert (sync.checkout("orders", new).root / "app.py").read_text() == "VERSION = 2\n"  # fetched, checked out
        local = open_local(upstream.path, old, cache_dir=tmp_path / "wt")
        assert (local.root / "app.py").read_text() == "VERSION = 1\n"
        assert not ran.exists()
        git(upstream.path, "checkout", "--quiet", "--detach", old)  # the planted hooks do run for git itself
        assert "post-checkout" in ran.read_text().splitlines()

    def test_a_local_repository_s_filters_and_diff_drivers_do_not_run(self, tmp_path: Path) -> None:
        """Third attacker review: `logagent analyze --repo` ran a `clean` filter of the repository's own config
        (reading a changed file's status), and its `smudge` at `--commit`; a diff driver's textconv, a blame;
        listing the working tree's files, its `core.fsmonitor`."""
        repo = GitRepo(tmp_path / "mine")
        head = repo.commit("app", {".gitattributes": "* filter=x diff=x\n", "app.py": "VERSION = 1\n"})
        ran = _plant_programs(repo, "x", tmp_path)
        monitor = tmp_path / "fsmonitor"  # the hooks of `_SAFE_GIT` went through only some of the commands
        monitor.write_text(f"#!/bin/sh\necho core.fsmonitor >> {ran}\n")
        monitor.chmod(0o755)
        git(repo.path, "config", "core.fsmonitor", str(monitor))
        _read_every_way(repo, head, tmp_path)
        assert not ran.exists()
        git(repo.path, "status", "--short")  # git itself runs them
        assert {"filter.x.clean", "core.fsmonitor"} <= set(ran.read_text().split())

    def test_filters_of_the_worktree_config_and_of_a_submodule_do_not_run(self, tmp_path: Path) -> None:
        """A fourth review: a clean filter in `.git/config.worktree` (`extensions.worktreeConfig`), which
        `git config --local` does not list, ran; so did one in a submodule's own config."""
        ran = tmp_path / "ran"
        sub = GitRepo(tmp_path / "sub")
        sub.commit("sub", {".gitattributes": "* filter=x\n", "f.txt": "a\n"})
        repo = GitRepo(tmp_path / "mine")
        repo.commit("app", {".gitattributes": "* filter=y\n", "app.py": "VERSION = 1\n"})
        git(repo.path, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub.path), "sub")
        repo.commit("with sub", {})
        git(repo.path, "config", "extensions.worktreeConfig", "true")
        git(repo.path, "config", "--worktree", "filter.y.clean", f"sh -c 'echo worktree >> {ran}; cat'")
        git(repo.path / "sub", "config", "filter.x.clean", f"sh -c 'echo submodule >> {ran}; cat'")
        for changed in (repo.path / "app.py", repo.path / "sub" / "f.txt"):
            os.utime(changed, (0, 0))
            changed.write_text(changed.read_text() + "# edited\n")
        assert "app.py" in open_local(repo.path).modified
        assert not ran.exists()
        # Git itself runs both when it hashes the files. `git status` runs a clean filter only when it must
        # read the file's content, and on one clean-clone run it did not read app.py's.
        git(repo.path, "hash-object", "--path", "app.py", "app.py")
        git(repo.path / "sub", "hash-object", "--path", "f.txt", "f.txt")
        assert set(ran.read_text().split()) == {"worktree", "submodule"}

    def test_a_filter_included_only_in_a_worktree_does_not_run(self, tmp_path: Path) -> None:
        """A fifth review: `includeIf.gitdir:**/worktrees/**` brought a required smudge filter that holds only in
        the worktree `--commit` adds, which git checked out with it (GitPython also failed on that config)."""
        repo = GitRepo(tmp_path / "mine")
        head = repo.commit("app", {".gitattributes": "app.py filter=x\n", "app.py": "VERSION = 1\n"})
        ran = tmp_path / "ran"
        (repo.path / ".git" / "x.cfg").write_text(f"[filter \"x\"]\n\tsmudge = sh -c 'echo x >> {ran}; cat'\n"
                                                 "\trequired = true\n")
        git(repo.path, "config", "includeIf.gitdir:**/worktrees/**.path", "x.cfg")
        checkout = open_local(repo.path, head, cache_dir=tmp_path / "wt")
        assert (checkout.root / "app.py").read_text() == "VERSION = 1\n" and not ran.exists()

    def test_a_driver_without_a_name_and_a_conditional_include_are_read_safely(self, tmp_path: Path) -> None:
        """A sixth review: `filter..clean` and `diff..textconv` (an empty driver name, `* filter= diff=`) were
        not neutralised and ran; any `includeIf` made GitPython fail opening the `.git` directory itself."""
        repo = GitRepo(tmp_path / "mine")
        head = repo.commit("app", {".gitattributes": "* filter= diff=\n", "app.py": "VERSION = 1\n"})
        ran = _plant_programs(repo, "", tmp_path)
        git(repo.path, "config", "includeIf.onbranch:**.path", "nothing.cfg")
        _read_every_way(repo, head, tmp_path)
        assert not ran.exists()

    def test_a_working_tree_kept_apart_is_refused(self, tmp_path: Path, upstream: GitRepo) -> None:
        """A fifth review: `core.worktree` naming another directory ended in a traceback (or no output)."""
        git(upstream.path, "config", "core.worktree", str(tmp_path))
        for commit in (None, upstream.head()):
            with pytest.raises(RepoError, match=r"sets core\.worktree"):
                open_local(upstream.path, commit, cache_dir=tmp_path / "wt")

    def test_a_clone_taking_config_from_elsewhere_is_cloned_afresh(self, tmp_path: Path, upstream: GitRepo) -> None:
        """Second attacker review: a `commondir` file in the clone made git read another repository's config,
        whose smudge filter ran at the next checkout."""
        other = tmp_path / "other.git"
        git(tmp_path, "clone", "--quiet", "--bare", str(upstream.path), other.name)
        ran = tmp_path / "ran"
        git(other, "config", "filter.x.smudge", f"sh -c 'touch {ran}; cat'")
        (other / "info" / "attributes").write_text("* filter=x\n")
        sync = make_sync(tmp_path, RepoSpec(url=str(upstream.path)))
        repo_dir = sync.checkout("orders", None).repo_dir
        (repo_dir / "commondir").write_text(f"{other}\n")
        (repo_dir / "gitdir").write_text(f"{repo_dir}/.git\n")
        new = upstream.commit("v2", {"app.py": "VERSION = 2\n"})
        checkout = sync.checkout("orders", new)
        assert checkout.notes[0] == "the repository cache held something other than a clone made here; cloned afresh"
        assert (checkout.root / "app.py").read_text() == "VERSION = 2\n" and not ran.exists()

    def test_a_replace_ref_does_not_stand_in_for_the_commit(self, tmp_path: Path, upstream: GitRepo) -> None:
        """Second attacker review: `refs/replace/<sha>` planted in the clone made the checkout of `sha` read
        another commit's files while naming `sha`."""
        deployed = upstream.head()
        evil = upstream.commit("evil", {"app.py": "VERSION = 666\n"})
        sync = make_sync(tmp_path, RepoSpec(url=str(upstream.path)))
        git(sync.checkout("orders", evil).repo_dir, "update-ref", f"refs/replace/{deployed}", evil)
        checkout = sync.checkout("orders", deployed)
        assert checkout.commit == deployed and (checkout.root / "app.py").read_text() == "VERSION = 1\n"

    def test_a_planted_directory_at_a_worktrees_place_is_not_read(self, tmp_path: Path, upstream: GitRepo) -> None:
        """A directory with a `.git` file of its own, or one copied from another worktree, is replaced by a
        real checkout of the commit."""
        old = upstream.head()
        new = upstream.commit("v2", {"app.py": "VERSION = 2\n"})
        sync = make_sync(tmp_path, RepoSpec(url=str(upstream.path)))
        other = sync.checkout("orders", old).root
        root = sync.checkout("orders", new).root
        for dot_git in ("gitdir: /nowhere\n", (other / ".git").read_text()):
            shutil.rmtree(root)
            root.mkdir()
            (root / ".git").write_text(dot_git)
            (root / "app.py").write_text("VERSION = 666\n")
            checkout = sync.checkout("orders", new)
            assert checkout.root == root and (root / "app.py").read_text() == "VERSION = 2\n"
        assert (other / "app.py").read_text() == "VERSION = 1\n"

    def test_a_cache_directory_another_user_owns_is_refused(self, tmp_path: Path, upstream: GitRepo,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
        """In a shared temp dir another user may have made `logagent-worktrees` first: it is not used."""
        planted = tmp_path / "logagent-worktrees"
        planted.mkdir()
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        monkeypatch.setattr(os, "getuid", lambda: planted.stat().st_uid + 1)
        with pytest.raises(RepoError, match="another user owns it"):
            open_local(upstream.path, upstream.head())


class TestFetchFailures:
    """Fetch failures do not lose the burst and never leak the token."""

    def test_fetch_failure_analyses_local_state(self, tmp_path: Path, upstream: GitRepo) -> None:
        """When the remote disappears, the checkout still works from the cache and says fetch failed."""
        sync = make_sync(tmp_path, RepoSpec(url=str(upstream.path)), fetch_min_interval_s=0)
        first = sync.checkout("orders", None)
        upstream.path.rename(tmp_path / "gone")
        again = sync.checkout("orders", "abcdef1234")
        assert again.commit == first.commit
        assert any(n.startswith("fetch failed:") for n in again.notes)

    def test_token_never_in_notes_errors_or_config(self, tmp_path: Path, upstream: GitRepo) -> None:
        """A failing HTTPS fetch with a token: the token is absent from notes, errors and the git config."""
        token_file = tmp_path / "token"
        token_file.write_text(TOKEN + "\n")
        sync = make_sync(tmp_path, RepoSpec(url=str(upstream.path), token_file=token_file),
                         fetch_min_interval_s=0)
        checkout = sync.checkout("orders", None)
        # Point the server at an unreachable HTTPS remote that carries the token in its URL as well.
        bad = RepoSpec(url=f"https://user:{TOKEN}@127.0.0.1:9/acme/orders.git", token_file=token_file)
        sync._config.servers["orders"] = bad
        failed = sync.checkout("orders", "0123456789abcdef")
        text = " ".join(failed.notes)
        assert "fetch failed" in text
        assert TOKEN not in text
        assert TOKEN not in (checkout.repo_dir / "config").read_text()

    def test_credentials_in_the_url_are_not_stored(self, tmp_path: Path, upstream: GitRepo) -> None:
        """A URL carrying user:token works, but the clone's stored remote URL has the credentials removed."""
        url = f"file://x-access-token:{TOKEN}@localhost{upstream.path}"
        sync = make_sync(tmp_path, RepoSpec(url=url), fetch_min_interval_s=0)
        checkout = sync.checkout("orders", "0123abcd")  # unknown: forces a fetch with the same URL
        assert checkout.commit == upstream.head()
        assert not any(n.startswith("fetch failed") for n in checkout.notes)
        assert TOKEN not in (checkout.repo_dir / "config").read_text()
        assert TOKEN not in " ".join(checkout.notes)

    def test_clone_failure_raises_redacted_retriable_error(self, tmp_path: Path) -> None:
        """With nothing local and an unreachable remote, the error is retriable and carries no token."""
        sync = make_sync(tmp_path, RepoSpec(url="https://127.0.0.1:9/acme/orders.git", token_env="GIT_TOKEN"),
                         environ={"GIT_TOKEN": TOKEN})
        with pytest.raises(RepoUnavailable) as info:
            sync.checkout("orders", None)
        assert info.value.retriable
        assert TOKEN not in str(info.value)
        assert not sync.repo_dir("orders").exists() and sync.repo_dir("orders").parent == tmp_path / "cache/repos"

    def test_token_reaches_git_only_through_the_credential_helper(self, tmp_path: Path,
                                                                  upstream: GitRepo) -> None:
        """The token is given to git via its environment, never in argv or the stored remote URL."""
        seen = tmp_path / "seen"
        fake_git = tmp_path / "bin/git"
        fake_git.parent.mkdir()
        real_git = subprocess.run(["which", "git"], capture_output=True, text=True, check=True).stdout.strip()
        fake_git.write_text(f'#!/bin/sh\necho "$@" >> {seen}\nexec {real_git} "$@"\n')
        fake_git.chmod(0o755)
        # Network git runs with the environment RepoSync is given, so its PATH finds the recording git.
        env = {"PATH": f"{fake_git.parent}:{os.environ['PATH']}", "GIT_TOKEN": TOKEN}
        sync = make_sync(tmp_path, RepoSpec(url=str(upstream.path), token_env="GIT_TOKEN"), environ=env)
        sync.checkout("orders", None)
        argv_log = seen.read_text()
        assert "clone" in argv_log
        assert TOKEN not in argv_log
        helper = next(a for a in argv_log.split(" ") if a.startswith("credential.helper=!"))
        # The same helper, asked by git for credentials, answers with the token from its environment.
        helper_cfg = argv_log[argv_log.index(helper):].split(" clone ")[0]
        answer = subprocess.run(["git", "-c", "credential.helper=", "-c", helper_cfg, "credential", "fill"],
                                input="protocol=https\nhost=git.example.com\n\n", capture_output=True,
                                text=True, check=True, env={**os.environ, "LOGAGENT_GIT_TOKEN": TOKEN})
        assert f"password={TOKEN}" in answer.stdout


class TestOpenLocal:
    """Analysing a plain local repository (logagent analyze --repo PATH)."""

    def test_a_repository_another_user_owns_says_why_git_refuses_it(self, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
        """A trial read "repository has no commits" of a repository git refused for its owner (safe.directory).
        Git's own test switch makes it see another owner, whoever runs the test."""
        repo = GitRepo(tmp_path / "theirs")
        repo.commit("one", {"a.py": "print(1)\n"})
        monkeypatch.setenv("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")
        with pytest.raises(RepoError, match=r"^git refuses .*another user owns it \(git's safe\.directory\); if you "
                                            r"trust it: git config --global --add safe\.directory "):
            open_local(repo.path)

    def test_head_reads_the_working_tree(self, upstream: GitRepo) -> None:
        """Without a commit the working tree itself is the root, pinned to HEAD."""
        checkout = open_local(upstream.path)
        assert checkout.root == upstream.path.resolve()
        assert checkout.commit == upstream.head()

    def test_dirty_tree_is_noted(self, upstream: GitRepo) -> None:
        """Uncommitted changes are noted, since citations pin HEAD."""
        (upstream.path / "app.py").write_text("VERSION = 99\n")
        assert any("uncommitted" in n for n in open_local(upstream.path).notes)

    def test_only_tracked_files_are_read_in_a_working_tree(self, upstream: GitRepo) -> None:
        """An untracked script, the event file beside it, an ignored `.env` and a tracked symlink to it are
        part of no commit: the tools neither read, list nor search them, the file index holds none of them,
        and a note names the untracked ones."""
        (upstream.path / "link.txt").symlink_to(".env")  # committed: a tracked link to an ignored file
        upstream.commit("ignore", {".gitignore": ".env\n", "src/cart.py": "PRICE = 'price'\n"})
        upstream.write({"try.py": "PRICE = 'price'\n", "ev.json": '{"message": "price"}', ".env": "price=hunter2\n",
                        "src/scratch.py": "price = 1\n"})
        checkout = open_local(upstream.path)
        assert not_in_commit_note(checkout.untracked, checkout.commit) == \
            f"files not in commit {checkout.commit[:12]} are not read (ev.json, src/scratch.py, try.py)"
        assert checkout.untracked == ("ev.json", "src/scratch.py", "try.py")
        tools = FileTools(checkout.root, repo_dir=checkout.repo_dir, commit=checkout.commit, tracked=checkout.tracked)
        for hidden in ("try.py", ".env", "link.txt", "src/scratch.py"):
            result = tools.read_file(hidden)
            assert result.status == "error" and "is not in the commit" in result.output, hidden
        assert tools.read_file("src/cart.py").status == "ok"
        grep = tools.grep_files("price", file_extension="")
        assert [match.path for match in grep.data or ()] == ["src/cart.py"]
        listed = tools.list_directory("").data or ()
        assert "src/" in listed and "link.txt" in listed and not {"try.py", "ev.json", ".env"} & {*listed}
        assert tools.list_directory("src").data == ("cart.py",)
        index = FileIndex.build(checkout.root, (), visible=tools.jail.visible)
        assert index.paths_ending(("try.py",)) == [] and index.paths_ending(("cart.py",)) == ["src/cart.py"]

    def test_what_a_working_tree_holds_as_git_and_the_file_system_name_it(self, tmp_path: Path,
                                                                         upstream: GitRepo) -> None:
        """An attacker review: an untracked name that is no UTF-8 (or one git quotes, with `core.quotePath` off)
        made GitPython raise; a file staged but never committed was read; a file hidden from git
        (`skip-worktree`) was read as committed; a submodule's files were not read at all."""
        library = GitRepo(tmp_path / "library")
        library.commit("lib", {"lib/m.py": "def f():\n    return 1\n"})
        git(upstream.path, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library.path), "sub")
        upstream.commit("config", {"settings.py": "DEBUG = False\n"})
        git(upstream.path, "config", "core.quotePath", "false")
        os.close(os.open(bytes(upstream.path / "bad") + b"\xffname.py", os.O_CREAT | os.O_WRONLY))
        upstream.write({'é"q.py': "x = 1\n", "staged.py": "TOKEN = 'SECRET-MARKER-123'\n", "line\nbreak.py": ""})
        git(upstream.path, "add", "staged.py")
        git(upstream.path, "update-index", "--skip-worktree", "settings.py")
        upstream.write({"settings.py": "DEBUG = True\n"})
        checkout = open_local(upstream.path)
        assert {"app.py", "settings.py", ".gitmodules", "sub/lib/m.py"} <= checkout.tracked
        assert "staged.py" not in checkout.tracked and "staged.py" in checkout.untracked
        assert "bad\udcffname.py" in checkout.untracked and 'é"q.py' in checkout.untracked
        assert checkout.modified == {"settings.py"}
        note = not_in_commit_note(checkout.untracked, checkout.commit)
        assert "\n" not in note and note.isprintable()
        tools = FileTools(checkout.root, repo_dir=checkout.repo_dir, commit=checkout.commit, tracked=checkout.tracked)
        assert tools.read_file("sub/lib/m.py").status == "ok" and tools.read_file("staged.py").status == "error"

    def test_a_deep_tree_is_seen_in_linear_time(self) -> None:
        """An attacker review: 3,000 files 1,000 folders deep took 9.2 s to list their folders."""
        deep = "/".join(["d"] * 1000)
        started = time.process_time()
        visible = tracked_only(frozenset(f"{deep}/f{index}" for index in range(3000)))
        assert time.process_time() - started < 1.0
        assert visible("d") and visible(deep) and visible(f"{deep}/f7") and not visible("e")

    def test_commit_gives_a_worktree_with_old_content(self, tmp_path: Path, upstream: GitRepo) -> None:
        """With a commit, an isolated worktree at that commit is used."""
        old = upstream.head()
        upstream.commit("v2", {"app.py": "VERSION = 2\n"})
        checkout = open_local(upstream.path, old[:8], cache_dir=tmp_path / "wt")
        assert checkout.commit == old
        assert (checkout.root / "app.py").read_text() == "VERSION = 1\n"
        assert (upstream.path / "app.py").read_text() == "VERSION = 2\n"

    def test_not_a_repository(self, tmp_path: Path, upstream: GitRepo) -> None:
        """A directory that is not a git repository, one that does not exist, and a folder inside a repository
        (which names the repository's top folder) are each a clear error."""
        with pytest.raises(RepoError, match=f"^not a git repository: {re.escape(str(tmp_path))}$"):
            open_local(tmp_path)
        with pytest.raises(RepoError, match=r"^no such repository directory: "):
            open_local(tmp_path / "missing")
        (upstream.path / "pkg").mkdir()
        top = upstream.path.resolve()
        with pytest.raises(RepoError, match=re.escape(f"a folder of the repository at {top}: give")):
            open_local(upstream.path / "pkg")

    def test_a_repository_without_commits_is_named(self, tmp_path: Path) -> None:
        """A trial's `repository has no commits` named no path, where the other errors name theirs."""
        git(tmp_path, "init", "-q")
        with pytest.raises(RepoError, match=f"^{re.escape(str(tmp_path))} has no commits yet: commit the code first"):
            open_local(tmp_path)

    def test_unknown_commit(self, upstream: GitRepo) -> None:
        """An unknown commit is a clear error for the CLI."""
        with pytest.raises(RepoError, match="not found"):
            open_local(upstream.path, "f" * 40)
