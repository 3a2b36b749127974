"""Repository access: one cached clone per server, analysed at the deployed commit in a detached worktree.

Network operations (clone, fetch) run `git` in a subprocess with a hard timeout. The token is handed to
git through an inline credential helper that reads it from the child's environment, so it never lands
in argv, the stored remote config, notes or exception text (git error text is redacted all the same).

The cache holds only what this module made: a clone is used when it is a real directory holding a bare
repository with the remote `_clone` sets up and no other config (`_is_our_clone`); anything else found in
its place (a directory of something else, a file, a symlink) is removed and cloned afresh, with a note. A
worktree is reused only when the clone names it back (`_is_worktree_of`). Symlinks in the cache are removed,
never followed, so nothing is read or written outside it; no git command runs a hook. The cache must be
writable by the service alone: what is planted there is refused where it could run a program or lead
outside the cache, but whoever can write it could also change the objects a commit is read from.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import git
from pydantic import BaseModel, ConfigDict, Field

from analysis.code.jail import shown_name
from analysis.errors import LogAgentError

_TOKEN_ENV = "LOGAGENT_GIT_TOKEN"  # noqa: S105 - the name of the child's env var, not a secret
# An inline credential helper: answers `get` with the token from the child's environment only.
_CREDENTIAL_HELPER = (
    '!f() { test "$1" = get && echo username=x-access-token && echo "password=${' + _TOKEN_ENV + '}"; }; f'
)
# Revisions come from untrusted log fields: refuse anything git could read as an option or a range.
_SAFE_REVISION = re.compile(r"^[0-9A-Za-z_][0-9A-Za-z._/+-]{0,199}$")
# A scheme starts after a character that cannot be part of one, so a long word is tried once, not per letter.
_URL_USERINFO = re.compile(r"(?<![a-zA-Z0-9+.-])(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]{0,30}://)[^/@\s]+@")
_SEEN_COMMITS_CAP = 2048
_MIN_ABBREV = 7
# A worktree handed out this recently may still be read by an analysis (the agent runs 120 s by default):
# it is not evicted, up to twice `max_worktrees` (which holds again once they age).
_IN_USE_S = 900.0
# git reads `<anything>-<n>-g<hex>` (what `git describe` writes) as an abbreviated sha of 4 digits or more.
_DESCRIBED = re.compile(r"-g[0-9a-fA-F]{4,6}$")
_MIRROR_REFSPEC = "+refs/heads/*:refs/heads/*"  # a clone's fetch refspec: the remote's branches as ours
# Every git command runs with no hooks, no file-system monitor and no replace refs: we only read, and
# nothing found in a repository (a planted `hooks/post-checkout`, `refs/replace/<sha>`) may run a program
# or stand in for a commit.
# A submodule's working tree is not looked into (its own config's filters would run there), nor checked out.
_SAFE_GIT = ("core.hooksPath=/dev/null", "core.fsmonitor=false", "core.useReplaceRefs=false",
             "log.showSignature=false", "diff.ignoreSubmodules=dirty", "submodule.recurse=false")
# Keys of a repository's own config that name a program git runs while reading it: a filter's (status runs
# `clean`, worktree add `smudge`) and a diff driver's textconv (blame runs it). A repository given to
# `logagent analyze --repo` was not cloned here: for our commands each filter is set empty (none) and not
# required, and each textconv set to `cat` (git has no empty one): `_PROGRAMS`, by section and key. External
# diff programs never run: every diff read passes `--no-ext-diff` or reads names only; nor does a signature
# check (`log.showSignature` is off).
_PROGRAMS = {("filter", "clean"): "", ("filter", "smudge"): "", ("filter", "process"): "",
             ("filter", "required"): "false", ("diff", "textconv"): "cat"}
# All a clone made here holds in its config (`git clone --bare`, then `_clone`); any other key (an
# `include`, a `core.sshCommand`, a URL rewrite) means something else wrote it.
_CLONE_CONFIG = {
    "core.repositoryformatversion", "core.filemode", "core.bare", "core.ignorecase", "core.precomposeunicode",
    "core.symlinks", "core.logallrefupdates", "extensions.objectformat", "remote.origin.url", "remote.origin.fetch",
}  # fmt: skip
# Files a clone made here never has, each of which would take config, attributes or objects from elsewhere.
_FOREIGN_FILES = ("commondir", "gitdir", "config.worktree", "info/attributes", "info/grafts",
                  "objects/info/alternates", "objects/info/http-alternates")


class RepoError(LogAgentError):
    """The repository cannot be read at all (not configured, never cloned). `reason` is a short code from
    a closed set, fit for a metric label: not_configured, no_commits, or one of `sync_reason`'s."""

    def __init__(self, message: str, reason: str = "other") -> None:
        super().__init__(message)
        self.reason = reason


class RepoUnavailable(RepoError):
    """No local copy exists and the clone failed; a later attempt may succeed."""

    retriable = True


_SYNC_REASONS = (
    ("timeout", ("timed out",)),
    ("auth", ("authentication failed", "could not read username", "permission denied", "403", "401")),
    ("not_found", ("not found", "does not appear to be a git repository", "does not exist", "404")),
    ("unreachable", ("could not resolve", "connection refused", "unable to access", "network is unreachable",
                     "connection timed out", "no route to host", "connection reset")),
)


def sync_reason(error_text: str) -> str:
    """Why a clone or fetch failed, as one of timeout, auth, not_found, unreachable, other."""
    lowered = error_text.lower()
    return next((reason for reason, marks in _SYNC_REASONS if any(m in lowered for m in marks)), "other")


class RepoSpec(BaseModel):
    """Where one server's source lives and the name of the secret holding its token. A key it does not have
    is refused (a trial's `brnch` read the default branch, and `tokenfile` no token, without a word)."""

    model_config = ConfigDict(extra="forbid")

    url: str
    branch: str = "main"
    token_env: str | None = Field(None, description="Name of the env var holding the token.")
    token_file: Path | None = Field(None, description="Mounted file holding the token.")


class RepoConfig(BaseModel):
    """Each server's repository, mapped by SERVERS from server id to git URL; the cache and the sync limits."""

    cache_dir: Path = Path("./.data/repos")
    fetch_min_interval_s: float = Field(
        60.0, ge=0, description="Fetches (and clone retries) of one server's repository are at least this far apart."
    )
    fetch_timeout_s: float = Field(60.0, gt=0)
    clone_timeout_s: float = Field(600.0, gt=0)
    max_worktrees: int = Field(8, ge=1, description="Worktrees kept per server; the least recent go first, "
                               "none handed out in the last 15 minutes unless there are twice as many.")
    servers: dict[str, RepoSpec] = Field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Checkout:
    """The source tree one analysis reads.

    `commit` is the full sha actually used; `requested` what the event named; `notes` say what limited
    the analysis; `sync_errors` the reasons (`sync_reason`) of fetches that failed on the way.
    `became_local_after_s` is set once per commit, on the first checkout where it is local: seconds since
    it was first requested (0.0 when it was already local then). `stand_in` says why the branch head was
    read in place of the commit the event named ("" when it named none, or that commit was read).
    """

    root: Path
    commit: str
    repo_dir: Path
    requested: str | None = None
    notes: tuple[str, ...] = ()
    became_local_after_s: float | None = None
    sync_errors: tuple[str, ...] = ()
    stand_in: str = ""
    tracked: frozenset[str] | None = None
    """In a working tree read as it is (`open_local` without a commit), the files of its HEAD commit: the only
    ones read (`jail.tracked_only`). None in a worktree at a commit, which holds nothing else."""
    modified: frozenset[str] = frozenset()
    """In such a working tree, the tracked files whose content is not the commit's (their lines may not be)."""
    untracked: tuple[str, ...] = ()
    """And the files there that are not the commit's (untracked, or staged only), which are not read."""

    def other_lines(self, path: str) -> bool:
        """Whether `path` (or the file a symlink of that name leads to) may not hold the commit's lines."""
        if not self.modified:
            return False
        real = (self.root / path).resolve()
        return path in self.modified or (real.is_relative_to(self.root)
                                         and real.relative_to(self.root).as_posix() in self.modified)


def redact_secret(text: str, secrets: tuple[str, ...]) -> str:
    """Remove every secret and any URL user-info from `text` (git error text, URLs for notes)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return _URL_USERINFO.sub(r"\g<scheme>***@", text)


def _safe_revision(requested: str) -> bool:
    # A short hex prefix names whichever commit of the history has it: a log guessing 4 hex digits (65,536
    # tries) reached old commits, a checkout each. Abbreviated shas are 7 digits at least, as git writes them.
    short_hex = len(requested) < _MIN_ABBREV and all(c in "0123456789abcdefABCDEF" for c in requested)
    return (bool(_SAFE_REVISION.match(requested)) and ".." not in requested and not short_hex
            and not _DESCRIBED.search(requested))


def open_repo(path: Path) -> git.Repo:
    """`git.Repo(path)` whose commands run no hooks, monitor nor replace refs (`_SAFE_GIT`), nor a program its
    own config names (`_PROGRAMS`: a filter set empty, a textconv to `cat`)."""
    try:
        repo = git.Repo(path)
    except AttributeError:  # GitPython reads an `includeIf` of a `.git` opened directly before it knows the dir
        if path.name != ".git":
            raise
        repo = git.Repo(path.parent)
    repo.git.set_persistent_git_options(c=list(_SAFE_GIT))
    try:  # `scope\0name\0` for each key; the repository's own are `local` (with what it includes) and `worktree`
        listed = repo.git.config("--show-scope", "--name-only", "--null", "--list").split("\0")
    except git.GitCommandError:
        listed = []  # no config at all
    names = [name for scope, name in zip(listed[::2], listed[1::2], strict=False) if scope in ("local", "worktree")]
    programs = [(name, _PROGRAMS[key]) for name in names if (key := _section_and_key(name)) in _PROGRAMS]
    if any("=" in name for name, _ in programs):  # `-c name=…` would split such a name at its own `=`
        repo.close()
        raise RepoError(f"{path}: its git config names a program under a key that holds '=': not read")
    if programs:
        repo.git.set_persistent_git_options(c=[*_SAFE_GIT, *(f"{name}={value}" for name, value in programs)])
    return repo


def _section_and_key(name: str) -> tuple[str, str] | None:
    """(`filter`, `clean`) of `filter.<driver>.clean`, an empty driver too: a key with a subsection,
    lower-cased; else None."""
    section, _, rest = name.lower().partition(".")
    _, dot, key = rest.rpartition(".")
    return (section, key) if dot else None  # `filter..clean`: git matches an empty driver name (`* filter=`)


def resolve_revision(repo_dir: Path, revision: str) -> str | None:
    """The full sha `revision` names in the repository at `repo_dir`; None when it is not there (or is
    not a plain revision: it may come from a log)."""
    if not _safe_revision(revision):
        return None
    with open_repo(repo_dir) as repo:
        return _resolve_commit(repo, revision)


def typed_revision(path: Path, revision: str) -> str | None:
    """The full sha of a revision a person typed (`HEAD~1`, `v1.2^`, a branch, a short sha); None when there
    is no such commit, or no repository. Any revision git reads is taken, but one read as an option: unlike
    a log's commit (`resolve_revision`), it comes from the person running the command."""
    if not revision or revision.startswith("-") or not revision.isprintable():
        return None
    try:
        with open_repo(path) as repo:
            return _resolve_commit(repo, revision)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None


def _resolve_commit(repo: git.Repo, revision: str) -> str | None:
    """The full sha `revision` names in `repo`, or None when it is not there (or not a commit)."""
    try:
        return str(repo.git.rev_parse("--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"))
    except git.GitCommandError:
        return None


class RepoSync:
    """Clones once per server, fetches on demand (rate-limited) and hands out worktrees at a commit.

    Thread-safe: one lock per server serialises its git operations.
    """

    def __init__(
        self,
        config: RepoConfig,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # Absolute: git runs inside each clone, where a relative worktree path would land in the clone.
        self._config = config.model_copy(update={"cache_dir": config.cache_dir.expanduser().absolute()})
        self._environ = os.environ if environ is None else environ
        self._clock = clock
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._last_fetch: dict[str, float] = {}
        self._failed_clone: dict[str, tuple[float, RepoUnavailable]] = {}
        self._first_requested: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._reported_local: OrderedDict[tuple[str, str], None] = OrderedDict()

    def repo_dir(self, server_id: str) -> Path:
        """Where the bare clone of `server_id` lives (its own: see `_dirname`)."""
        return self._config.cache_dir / "repos" / _dirname(server_id)

    def checkout(self, server_id: str, commit: str | None) -> Checkout:
        """A worktree of `server_id` at `commit` (or its branch head); fetches first if the commit is unknown.

        Raises RepoError when the server has no repository configured, RepoUnavailable when nothing is
        local and cloning failed. Fetch failures never raise: the checkout says so in `notes`.
        """
        spec = self._config.servers.get(server_id)
        if spec is None:
            raise RepoError(f"no repository configured for server {server_id!r}", "not_configured")
        with self._lock(server_id):
            return self._checkout_locked(server_id, spec, commit)

    def _checkout_locked(self, server_id: str, spec: RepoSpec, requested: str | None) -> Checkout:
        repo_dir = self.repo_dir(server_id)
        token = self._token(spec)
        notes: list[str] = []
        if not _is_our_clone(repo_dir):
            if os.path.lexists(repo_dir):
                notes.append("the repository cache held something other than a clone made here; cloned afresh")
            self._clone(server_id, spec, token)
        with open_repo(repo_dir) as repo:
            return self._checkout_in(repo, server_id, spec, token, requested, notes)

    def _checkout_in(
        self, repo: git.Repo, server_id: str, spec: RepoSpec, token: str | None, requested: str | None,
        notes: list[str],
    ) -> Checkout:
        sync_errors: list[str] = []
        revision = requested
        stand_in = ""
        if requested is not None and not _safe_revision(requested):
            stand_in = "requested revision is not a usable git revision; used branch head"
            notes.append(stand_in)
            revision = None
        sha = _resolve_commit(repo, revision) if revision else None
        if sha is None and revision:
            self._first_requested_at(server_id, revision)  # its lag runs from here, through the fetch below
        why_missing = "not in the clone"
        if sha is None and self._fetch_due(server_id):
            error = self._fetch(server_id, spec, token)
            if error:
                notes.append(f"fetch failed: {error}; analysed local state")
                sync_errors.append(sync_reason(error))
                why_missing = f"fetch failed ({sync_reason(error)})"
            if revision:
                sha = _resolve_commit(repo, revision)
        elif sha is None and revision:
            notes.append("fetch skipped (rate-limited)")
            why_missing = "not in the clone as last fetched (fetches are rate-limited)"
        lag = None
        if sha is not None and revision:
            lag = self._became_local(server_id, revision)
        elif revision:
            sha = self._branch_head(repo, spec, notes)
            notes.append(f"commit {revision[:40]} not found; used branch head")
            stand_in = f"commit {revision[:40]} {why_missing}; used branch head"
        else:
            sha = self._branch_head(repo, spec, notes)
        root = self._worktree(repo, server_id, sha)
        return Checkout(
            root=root,
            commit=sha,
            repo_dir=self.repo_dir(server_id),
            requested=requested,
            notes=tuple(notes),
            became_local_after_s=lag,
            sync_errors=tuple(sync_errors),
            stand_in=stand_in,
        )

    def _lock(self, server_id: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(server_id, threading.Lock())

    def _token(self, spec: RepoSpec) -> str | None:
        """The token, read at call time so a rotated secret is picked up without a restart."""
        if spec.token_env:
            value = self._environ.get(spec.token_env, "").strip()
            if value:
                return value
        if spec.token_file is not None:
            try:
                value = spec.token_file.read_text(encoding="utf-8").strip()
            except OSError:
                return None
            return value or None
        return None

    def _git_network(self, args: list[str], token: str | None, timeout_s: float, cwd: Path | None) -> str:
        """Run a network git command; returns "" on success, else redacted, bounded error text."""
        env = {k: v for k, v in self._environ.items() if k != _TOKEN_ENV}
        env["GIT_TERMINAL_PROMPT"] = "0"
        argv = ["git", *(arg for option in _SAFE_GIT for arg in ("-c", option)), "-c", "credential.helper="]
        if token:
            env[_TOKEN_ENV] = token
            argv += ["-c", f"credential.helper={_CREDENTIAL_HELPER}"]
        secrets = (token,) if token else ()
        try:
            proc = subprocess.run(
                argv + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
            )
        except subprocess.TimeoutExpired:
            return f"timed out after {timeout_s:g}s"
        except OSError as exc:
            return redact_secret(str(exc), secrets)[:300]
        if proc.returncode == 0:
            return ""
        text = " ".join(proc.stderr.split()) or f"git exited with {proc.returncode}"
        return redact_secret(text, secrets)[:300]

    def _clone(self, server_id: str, spec: RepoSpec, token: str | None) -> None:
        failed = self._failed_clone.get(server_id)
        if failed is not None and self._clock() - failed[0] < self._config.fetch_min_interval_s:
            # A bad URL must not cost a clone attempt (up to clone_timeout_s) on every burst of the server.
            raise RepoUnavailable(f"{failed[1]} (not retried for {self._config.fetch_min_interval_s:g}s)",
                                  failed[1].reason)
        repo_dir = self.repo_dir(server_id)
        _real_dirs(self._config.cache_dir, repo_dir.parent)
        staging = Path(tempfile.mkdtemp(prefix=".clone-", dir=repo_dir.parent))
        self._last_fetch[server_id] = self._clock()
        error = self._git_network(
            ["clone", "--bare", "--quiet", "--", spec.url, str(staging / "git")],
            token,
            self._config.clone_timeout_s,
            cwd=None,
        )
        if error:
            shutil.rmtree(staging, ignore_errors=True)
            unavailable = RepoUnavailable(f"clone of {server_id!r} failed: {error}", sync_reason(error))
            self._failed_clone[server_id] = (self._clock(), unavailable)
            raise unavailable
        self._failed_clone.pop(server_id, None)
        with open_repo(staging / "git") as clone, clone.config_writer() as cfg:
            # A bare clone has no fetch refspec; mirror the remote's branches and tags into ours.
            cfg.set_value('remote "origin"', "fetch", _MIRROR_REFSPEC)
            # Fetches pass the configured URL each time; the stored one never keeps credentials.
            cfg.set_value('remote "origin"', "url", redact_secret(spec.url, ()))
        # Rename into place last so a half-done clone is never mistaken for a usable one.
        try:
            if not _is_our_clone(repo_dir):
                _discard(repo_dir)
            (staging / "git").rename(repo_dir)
        except OSError as failed:
            # Another process sharing this cache put its clone there first: use that one.
            if not _is_our_clone(repo_dir):
                raise RepoError(f"cannot put the clone of {server_id!r} in the repository cache "
                                f"({failed.strerror or type(failed).__name__})") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _fetch_due(self, server_id: str) -> bool:
        last = self._last_fetch.get(server_id)
        return last is None or self._clock() - last >= self._config.fetch_min_interval_s

    def _fetch(self, server_id: str, spec: RepoSpec, token: str | None) -> str:
        self._last_fetch[server_id] = self._clock()
        return self._git_network(
            ["fetch", "--quiet", "--prune", "--tags", "--", spec.url, _MIRROR_REFSPEC],
            token,
            self._config.fetch_timeout_s,
            cwd=self.repo_dir(server_id),
        )

    def _first_requested_at(self, server_id: str, revision: str) -> float:
        key = (server_id, revision)
        with self._locks_guard:  # shared across servers, whose checkouts run concurrently
            return self._first_requested_at_locked(key)

    def _first_requested_at_locked(self, key: tuple[str, str]) -> float:
        if key not in self._first_requested:
            self._first_requested[key] = self._clock()
            while len(self._first_requested) > _SEEN_COMMITS_CAP:
                self._first_requested.popitem(last=False)
        return self._first_requested[key]

    def _became_local(self, server_id: str, revision: str) -> float | None:
        """Seconds from first request to local, reported once per commit (None afterwards)."""
        key = (server_id, revision)
        with self._locks_guard:
            return self._became_local_locked(key)

    def _became_local_locked(self, key: tuple[str, str]) -> float | None:
        if key in self._reported_local:
            return None
        self._reported_local[key] = None
        while len(self._reported_local) > _SEEN_COMMITS_CAP:
            self._reported_local.popitem(last=False)
        first = self._first_requested.pop(key, None)
        return 0.0 if first is None else max(0.0, self._clock() - first)

    def _branch_head(self, repo: git.Repo, spec: RepoSpec, notes: list[str]) -> str:
        """The head of the branch configured, else of the repository's default branch (said in a note only when
        a branch was configured: the default `main` is a guess)."""
        branch = spec.branch
        sha = _resolve_commit(repo, f"refs/heads/{branch}") if _safe_revision(branch) else None
        if sha is None:
            sha = _resolve_commit(repo, "HEAD")
            if "branch" in spec.model_fields_set:
                notes.append(f"branch {branch!r} not found; used the default branch")
        if sha is None:
            raise RepoError("repository has no commits", "no_commits")
        return sha

    def _worktree(self, repo: git.Repo, server_id: str, sha: str) -> Path:
        base = self._config.cache_dir / "worktrees" / _dirname(server_id)
        return _ensure_worktree(repo, self._config.cache_dir, base / sha, sha, self._config.max_worktrees)


def _is_our_clone(repo_dir: Path) -> bool:
    """Whether `repo_dir` is a clone `RepoSync._clone` made: a real directory (no symlink in it is followed)
    holding a bare repository with the fetch refspec `_clone` sets, no other config than a clone's and none
    of the `_FOREIGN_FILES`."""
    parts = [repo_dir, *(repo_dir / name for name in ("HEAD", "config", "objects", "refs"))]
    if any(part.is_symlink() for part in parts) or not repo_dir.is_dir() or not (repo_dir / "HEAD").is_file():
        return False
    if any(os.path.lexists(repo_dir / name) for name in _FOREIGN_FILES):
        return False
    # Read by git itself: another parser may read a file differently (a key on its section's line).
    try:
        listed = subprocess.run(
            ["git", "config", "--file", str(repo_dir / "config"), "--no-includes", "--null", "--list"],
            capture_output=True, timeout=30, check=True,
        ).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError):
        return False
    config: dict[str, list[str]] = {}
    for entry in filter(None, listed.split("\0")):
        key, _, value = entry.partition("\n")
        config.setdefault(key, []).append(value)
    return (set(config) <= _CLONE_CONFIG and config.get("core.bare") == ["true"]
            and config.get("remote.origin.fetch") == [_MIRROR_REFSPEC])


def _discard(path: Path) -> None:
    """Remove what is at `path`: a symlink itself (never what it points to), a file, or a directory tree
    (`shutil.rmtree` does not follow the symlinks inside it)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def _real_dirs(root: Path, path: Path) -> None:
    """Make each directory from below `root` down to `path` a real one of ours: a symlink or file in the way
    is removed, never followed, and one another user owns is refused (`root` itself is the operator's: it
    may be a symlink to a volume, or the shared temp dir)."""
    current = root
    try:
        root.mkdir(parents=True, exist_ok=True)
        for part in path.relative_to(root).parts:
            current /= part
            if current.is_symlink() or current.is_file():
                current.unlink()
            current.mkdir(mode=0o700, exist_ok=True)
            if current.stat().st_uid != os.getuid():
                raise RepoError(f"cannot use {current} as a directory of the repository cache (another user owns it)")
    except OSError as failed:  # another user's symlink in a shared temp dir, a read-only volume
        raise RepoError(f"cannot use {current} as a directory of the repository cache "
                        f"({failed.strerror or type(failed).__name__})") from None


def _ensure_worktree(repo: git.Repo, root: Path, path: Path, sha: str, cap: int) -> Path:
    """A detached worktree of `sha` at `path` under `root`, reused when present; the least recent beyond
    `cap` go. A symlink on the way is removed, never followed."""
    _real_dirs(root, path.parent)
    if _is_worktree_of(repo, path, sha):
        os.utime(path)
        return path.resolve()
    _discard(path)
    repo.git.worktree("prune")
    # Checked out by a repository opened there: a condition of an `includeIf` (on the git dir) may hold only
    # in a worktree, and bring a filter with it (a review's smudge ran at `worktree add`).
    repo.git.worktree("add", "--detach", "--force", "--no-checkout", str(path), sha)
    with open_repo(path) as added:
        added.git.reset("--hard", "--quiet")
    siblings = sorted(
        (p for p in path.parent.iterdir() if p.is_dir() and not p.is_symlink() and p != path),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for index, old in enumerate(siblings[cap - 1 :], start=cap - 1):
        if index < 2 * cap - 1 and time.time() - old.stat().st_mtime < _IN_USE_S:
            continue  # an analysis may still read it; past twice the cap, disk comes first
        try:
            repo.git.worktree("remove", "--force", str(old))
        except git.GitCommandError:
            shutil.rmtree(old, ignore_errors=True)
    repo.git.worktree("prune")
    return path.resolve()


def _is_worktree_of(repo: git.Repo, path: Path, sha: str) -> bool:
    """Whether `path` is a worktree `repo` added, detached at `sha`: its `.git` file names an entry of the
    repository's worktrees that names it back (a planted directory with a `.git` file is no checkout)."""
    marker = path / ".git"
    if path.is_symlink() or marker.is_symlink() or not marker.is_file():
        return False
    try:
        # Either path may be relative (`worktree.useRelativePaths`): to the file's own directory.
        entry = (path / marker.read_text(encoding="utf-8").removeprefix("gitdir:").strip()).resolve()
        named_back = (entry / (entry / "gitdir").read_text(encoding="utf-8").strip()).resolve()
        head = (entry / "HEAD").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return False
    worktrees = Path(repo.common_dir).resolve() / "worktrees"
    return entry.parent == worktrees and named_back == marker.resolve() and head == sha


def _dirname(name: str) -> str:
    """A directory name of its own for an untrusted id: readable, with no separators or dot-dot, and a
    digest of the exact id, so ids the cleaning maps alike (`team/pay`, `team_pay`, `Team_Pay` on a
    case-insensitive disk) never share a clone."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", name).strip(".") or "_"
    return f"{cleaned[:80]}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def open_local(path: Path, commit: str | None = None, cache_dir: Path | None = None) -> Checkout:
    """A checkout of a plain local repository (for `logagent analyze --repo PATH`).

    Without `commit` the working tree itself is read (pinned to HEAD for citations, noted when dirty);
    with one, a detached worktree under `cache_dir` (default: the system temp dir) is used.
    """
    elsewhere = subprocess.run(["git", "-C", str(path), "config", "--get", "core.worktree"], capture_output=True,
                               timeout=30, check=False).stdout.strip() if path.is_dir() else b""
    if elsewhere:  # git and GitPython then disagree on its files (a review: a traceback, or nothing at all)
        raise RepoError(f"{path}: its git config sets core.worktree (its files are kept elsewhere): not read")
    try:
        repo = open_repo(path)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
        raise RepoError(_not_a_repository(path)) from exc
    with repo:
        return _open_local(repo, path, commit, cache_dir)


def not_in_commit_note(names: Sequence[str], sha: str) -> str:
    """The note naming a working tree's files that its commit lacks (the first three), which are not read
    (`Checkout.untracked`: said by its reader, which knows which of them a trace names)."""
    shown = ", ".join(map(shown_name, names[:3])) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"files not in commit {sha[:12]} are not read ({shown})"


def _working_tree_files(repo: git.Repo) -> tuple[frozenset[str], frozenset[str], tuple[str, ...]]:
    """A working tree's files as `Checkout` holds them: those of HEAD (submodules' included) that are there,
    those whose content may not be HEAD's (changed, or hidden from git by `skip-worktree` or `assume-unchanged`),
    and the untracked ones, added-but-never-committed ones included. Names are read as bytes, as the file
    system holds them (`surrogateescape`): git quotes no name, and no name fails to decode."""
    def names(command: str, *args: str) -> list[str]:  # through `repo.git`, which adds its `-c` options
        out = getattr(repo.git, command.replace("-", "_"))(*args, "-z", stdout_as_string=False)
        return [name for name in out.decode("utf-8", "surrogateescape").split("\0") if name]

    added = set(names("diff", "--cached", "--name-only", "--diff-filter=A", "HEAD"))
    flagged = names("ls-files", "-v", "--recurse-submodules")  # `S`: skip-worktree; a lower-case letter: unchanged
    hidden = {line[2:] for line in flagged if line[:1] == "S" or line[:1].islower()}
    tracked = frozenset(line[2:] for line in flagged) - added
    modified = frozenset(names("diff", "HEAD", "--name-only")) - added | hidden
    untracked = tuple(sorted({*names("ls-files", "--others", "--exclude-standard"), *added}))
    return tracked, modified, untracked


def _why_no_head(repo: git.Repo, path: Path) -> str:
    """Why HEAD names no commit: none yet, or git refuses a repository another user owns (`safe.directory`)."""
    try:
        repo.git.rev_parse("--verify", "HEAD")
    except git.GitCommandError as refused:
        if "dubious ownership" in str(refused.stderr):
            return (f"git refuses {path}: another user owns it (git's safe.directory); if you trust it: "
                    f"git config --global --add safe.directory {path.resolve()}")
    return f"{path} has no commits yet: commit the code first (git add, git commit)"


def _not_a_repository(path: Path) -> str:
    """Why `path` opens no repository, and where the repository is when `path` is a folder inside one."""
    if not path.is_dir():
        return f"{path} is a file, not a repository's folder" if path.exists() else \
            f"no such repository directory: {path}"
    top = next((folder for folder in path.resolve().parents if (folder / ".git").exists()), None)
    inside = f" (it is a folder of the repository at {top}: give that)" if top is not None else ""
    return f"not a git repository: {path}{inside}"


def _open_local(repo: git.Repo, path: Path, commit: str | None, cache_dir: Path | None) -> Checkout:
    repo_dir = Path(repo.git_dir).resolve()
    notes: list[str] = []
    if commit is None:
        sha = _resolve_commit(repo, "HEAD")
        if sha is None:
            raise RepoError(_why_no_head(repo, path))
        if repo.working_tree_dir is None:
            raise RepoError("a bare repository needs --commit")
        if repo.is_dirty(untracked_files=False):
            notes.append("working tree has uncommitted changes; citations are pinned to HEAD")
        tracked, modified, untracked = _working_tree_files(repo)
        return Checkout(root=Path(repo.working_tree_dir).resolve(), commit=sha, repo_dir=repo_dir,
                        notes=tuple(notes), tracked=tracked, modified=modified, untracked=untracked)
    sha = _resolve_commit(repo, commit) if _safe_revision(commit) else None
    if sha is None:
        raise RepoError(f"commit {commit[:40]!r} not found in {path}")
    # In the shared temp dir, `logagent-worktrees` is ours to check too: another user may have put a symlink there.
    root_dir = (cache_dir or Path(tempfile.gettempdir())).absolute()  # git runs in the repository
    base = (root_dir if cache_dir else root_dir / "logagent-worktrees") / _dirname(repo_dir.as_posix())
    root = _ensure_worktree(repo, root_dir, base / sha, sha, cap=8)
    return Checkout(root=root, commit=sha, repo_dir=repo_dir, requested=commit, notes=tuple(notes))
