"""A file cache in the user's cache directory that no other user can feed: for the compiled redaction
prefilter (`analysis.intake.redact`), whose compile costs ~0.3 s of CPU at every start otherwise.

What is read back decides what redaction looks for (a database that names no rule lets every secret
through), so it is read only from a directory that no other user can have put there or can swap:
`$XDG_CACHE_HOME/logagent` (an absolute path; else `~/.cache/logagent`) is opened one directory at a time
from `/`, none of them a symbolic link, each owned by this user or root and writable by no one else (but
a sticky one such as `/tmp`, where others cannot move what is not theirs), the last one this user's own.
Every read and write then goes through that open directory, so renaming a directory on the way changes
nothing, and a file is read only if it is this user's and writable by no one else. A missing directory is
made (mode 700) on the way, never inside another user's (root with another user's HOME leaves it alone).
When the cache cannot be used, nothing is read or written and the caller computes again: so in a
container whose HOME or `XDG_CACHE_HOME` is a volume writable by a group, each start compiles.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

__all__ = ["read", "write"]

_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def read(name: str) -> bytes | None:
    """The cached file `name`, or None (absent, or not to be trusted)."""
    with _directory() as directory:
        if directory is None:
            return None
        with contextlib.suppress(OSError):
            # Non-blocking: a FIFO in its place would hold the start forever (a regular file reads as usual).
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=directory)
            with os.fdopen(fd, "rb") as handle:
                found = os.fstat(handle.fileno())
                if stat.S_ISREG(found.st_mode) and found.st_uid == os.getuid() and not found.st_mode & 0o022:
                    return handle.read()
    return None


def write(name: str, data: bytes) -> None:
    """Keep `data` as `name` (written whole under another name, then renamed); silently not when the cache
    cannot be used."""
    with _directory() as directory, contextlib.suppress(OSError):
        if directory is None:
            return
        part = f"{name}.{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(part, dir_fd=directory)  # left by a process of the same id that died mid-write
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=directory)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(part, name, src_dir_fd=directory, dst_dir_fd=directory)


@contextlib.contextmanager
def _directory() -> Iterator[int | None]:
    """An open descriptor of the cache directory (see the module doc), or None."""
    fd = _open()
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def _open() -> int | None:
    root = Path(os.environ.get("XDG_CACHE_HOME", ""))
    if not root.is_absolute():
        try:
            root = Path.home() / ".cache"
        except (RuntimeError, KeyError):  # no HOME and no passwd entry: no cache
            return None
    parts = (root.resolve() / "logagent").parts[1:]
    fd = os.open("/", _OPEN_DIR)
    try:
        for index, part in enumerate(parts):
            try:
                child = os.open(part, _OPEN_DIR, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(part, 0o700, dir_fd=fd)
                child = os.open(part, _OPEN_DIR, dir_fd=fd)
            os.close(fd)
            fd = child
            if not safe_directory(os.fstat(fd), last=index == len(parts) - 1):
                return None
        found, fd = fd, -1
        return found
    except OSError:
        return None
    finally:
        if fd >= 0:
            os.close(fd)


def safe_directory(found: os.stat_result, *, last: bool) -> bool:
    """A directory on the way (or, `last`, the cache directory itself) that no other user can swap."""
    uid = os.getuid()
    if last:
        return found.st_uid == uid and not found.st_mode & 0o022
    if found.st_uid not in (uid, 0):
        return False
    return not found.st_mode & 0o022 or (found.st_uid == 0 and bool(found.st_mode & stat.S_ISVTX))
