"""A file cache in the user's cache directory that no other user can feed: for the compiled redaction
prefilter (`analysis.intake.redact`), whose compile costs 0.4-0.8 s of CPU at every start otherwise.

What is read back decides what redaction looks for (a database that names no rule lets every secret
through), so it is used only where no other user can reach: `$XDG_CACHE_HOME/logagent` (an absolute path;
else `~/.cache/logagent`) is opened one directory at a time from `/`, each owned by root or this user and
writable by no one else, and the one the walk ends on this user's own; a symbolic link on the way is
followed only when it is root's or this user's, at most 16 of them. No other user can then add, swap or
link anything on the way (no sticky `/tmp` either: a HOME there gets no cache), and no directory on the
way may be on FUSE, whose daemon reports any owner and mode and hides the directory it is mounted on
(with `user_allow_other`, another user may mount one on a directory they may write; the table of mounts is
read once the directories are held open, and when it cannot be read the cache is not used). Every read and
write goes through the open directory, and a file is read only if it is this user's, has one name, is
writable by no one else and is at most 64 MiB. A write makes the cache home and `logagent` (mode 700)
when missing, as written in the configured path, never a directory above them or one a link names, and
may remove this user's older files of the same kind (`keep`), and their part files an hour old (a write
killed before its rename leaves one). When
the cache cannot be used, nothing is read or written and the caller computes again: so under a
HOME in `/tmp`, each start compiles (the image sets `XDG_CACHE_HOME` to a directory of its user's, filled
at build time).
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["fuse_devices", "read", "safe_directory", "write"]

_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_MAX_LINKS = 16  # symbolic links followed on the way (a loop ends there)
_MAX_BYTES = 64 << 20  # the prefilter's database is ~1.5 MB
_STALE_PART_NS = 3600 * 10**9  # a part file this old was left by a process killed mid-write (a write takes ms)


def read(name: str) -> bytes | None:
    """The cached file `name`, or None (absent, or not to be trusted)."""
    with _directory(create=False) as directory:
        if directory is None:
            return None
        with contextlib.suppress(OSError):
            # Non-blocking: a FIFO in its place would hold the start forever (a regular file reads as usual).
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=directory)
            with os.fdopen(fd, "rb") as handle:
                found = os.fstat(handle.fileno())
                if stat.S_ISREG(found.st_mode) and found.st_uid == os.geteuid() and not found.st_mode & 0o022 \
                        and found.st_nlink == 1 and found.st_size <= _MAX_BYTES:
                    return handle.read(_MAX_BYTES + 1)
    return None


def write(name: str, data: bytes, *, kin: tuple[str, str] = ("", ""), keep: int = 0) -> None:
    """Keep `data` as `name` (written whole under another name, then renamed); silently not when the cache
    cannot be used. With `keep`, of the files named like it (`kin`: prefix and suffix), only the `keep`
    written last stay: each change of the rules would leave its own file behind for ever."""
    with _directory(create=True) as directory, contextlib.suppress(OSError):
        if directory is None:
            return
        part = f"{name}.{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(part, dir_fd=directory)  # left by a process of the same id that died mid-write
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=directory)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(part, name, src_dir_fd=directory, dst_dir_fd=directory)
        if keep:
            _prune(directory, kin, keep, name)


def _prune(directory: int, kin: tuple[str, str], keep: int, written: str) -> None:
    """Remove this user's regular files named like `kin` but the `keep` newest (`written` among them), and
    their part files (`<name>.<pid>`) an hour old: a process killed mid-write leaves one behind."""
    prefix, suffix = kin
    mine: list[tuple[int, str]] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            name = entry.name
            if name.startswith(prefix) and name != written and (name.endswith(suffix) or _is_part(name, suffix)):
                with contextlib.suppress(FileNotFoundError):  # renamed by another process's write meanwhile
                    found = entry.stat(follow_symlinks=False)
                    if stat.S_ISREG(found.st_mode) and found.st_uid == os.geteuid():
                        mine.append((found.st_mtime_ns, name))
    others = sorted((mtime, name) for mtime, name in mine if name.endswith(suffix))
    stale = [name for mtime, name in mine if _is_part(name, suffix) and mtime < time.time_ns() - _STALE_PART_NS]
    for name in [name for _, name in others[: max(0, len(others) - (keep - 1))]] + stale:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=directory)


def _is_part(name: str, suffix: str) -> bool:
    whole, dot, pid = name.rpartition(".")
    return bool(dot) and whole.endswith(suffix) and pid.isdigit()


@contextlib.contextmanager
def _directory(*, create: bool) -> Iterator[int | None]:
    """An open descriptor of the cache directory (see the module doc), or None; with `create`, the cache
    home and its `logagent` are made when missing (never a directory above them, such as a missing HOME)."""
    fd = _open(create)
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def _open(create: bool) -> int | None:
    root = Path(os.environ.get("XDG_CACHE_HOME", ""))
    if not root.is_absolute():
        try:
            root = Path.home() / ".cache"
        except (RuntimeError, KeyError):  # no HOME and no passwd entry: no cache
            return None
    if not root.is_absolute():
        return None
    # (name, written in the configured path rather than in a link's target): only those are ever made.
    pending = [(part, True) for part in (root / "logagent").parts[1:]]
    stack: list[int] = []  # the directories walked through, each checked when opened
    links = 0
    try:
        stack.append(os.open("/", _OPEN_DIR))
        if not safe_directory(os.fstat(stack[0]), last=False):
            return None
        while pending:
            part, written = pending.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                if len(stack) > 1:
                    os.close(stack.pop())
                continue
            try:
                found = os.stat(part, dir_fd=stack[-1], follow_symlinks=False)
            except FileNotFoundError:
                if not (create and written and len(pending) <= 1):
                    return None
                os.mkdir(part, 0o700, dir_fd=stack[-1])
                found = os.stat(part, dir_fd=stack[-1], follow_symlinks=False)
            if stat.S_ISLNK(found.st_mode):  # followed only when root's or this user's (`/home -> /var/home`)
                links += 1
                if links > _MAX_LINKS or found.st_uid not in (0, os.geteuid()):
                    return None
                target = Path(os.readlink(part, dir_fd=stack[-1]))
                if target.is_absolute():
                    while len(stack) > 1:
                        os.close(stack.pop())
                pending[:0] = [(name, False) for name in (target.parts[1:] if target.is_absolute() else target.parts)]
                continue
            stack.append(os.open(part, _OPEN_DIR, dir_fd=stack[-1]))  # a link swapped in since: ELOOP
            if not safe_directory(os.fstat(stack[-1]), last=False):
                return None
        # The walk may end on a directory reached by `..` or a link: check it as the cache directory.
        if len(stack) < 2 or not safe_directory(os.fstat(stack[-1]), last=True):
            return None
        # A FUSE mount reports any owner and mode, and hides the directory under it: none on the way. Read
        # now, while the descriptors hold the directories, so no mount made since can pass unseen.
        fuse = fuse_devices()
        if fuse is None or not fuse.isdisjoint(os.fstat(fd).st_dev for fd in stack):
            return None
        return stack.pop()
    except OSError:
        return None
    finally:
        for fd in stack:
            os.close(fd)


def fuse_devices(mountinfo: Path = Path("/proc/self/mountinfo")) -> set[int] | None:
    """The devices of this process's FUSE mounts, or None when the mount table cannot be read."""
    try:
        lines = mountinfo.read_bytes().splitlines()
    except OSError:
        return None
    devices = set()
    for line in lines:
        fields = line.split()
        with contextlib.suppress(ValueError, IndexError):
            if fields[fields.index(b"-") + 1].startswith(b"fuse"):
                major, minor = fields[2].split(b":")
                devices.add(os.makedev(int(major), int(minor)))
    return devices


def safe_directory(found: os.stat_result, *, last: bool) -> bool:
    """A directory on the way (root's or this user's), or `last` the cache directory itself (this user's),
    that no one else may write."""
    return found.st_uid in ((os.geteuid(),) if last else (os.geteuid(), 0)) and not found.st_mode & 0o022
