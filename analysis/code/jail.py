"""The jail of the file tools: paths resolved inside one checkout, and only regular files read.

A repository is untrusted too. Paths are resolved for real and must stay inside the checkout
(`Path.is_relative_to`, not a string prefix); `.git`, absolute paths, NUL bytes, symlink loops and
symlinks leading outside are refused. A file is opened without blocking and read only when the open
descriptor is a regular file of bounded size, so a FIFO, socket or device in a working tree can neither
hang a tool nor feed it endless bytes. Every refusal is a `Refused` whose message the model can act on.

In a working tree (`logagent analyze --repo` without a commit) only the files of its HEAD commit are seen:
an untracked or only staged script, the event file beside it or an ignored `.env` is part of no commit, so
it is neither read, listed nor searched (`tracked_only`); nor is a committed symlink's target outside them.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath

__all__ = ["Jail", "Refused", "shown_name", "tracked_only"]

_BINARY_SNIFF_BYTES = 8192
_KINDS = (
    (stat.S_ISDIR, "a directory; use list_directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO), not a regular file"),
    (stat.S_ISSOCK, "a socket, not a regular file"),
    (stat.S_ISCHR, "a character device, not a regular file"),
    (stat.S_ISBLK, "a block device, not a regular file"),
)


class Refused(Exception):
    """A path or file the jail refuses; the message is shown to the model."""


def shown_name(name: str) -> str:
    """A file name as output prints it: one with a newline, another control character or a bidi override
    written out, so a name committed as `x\\nconfig.py:1: FAKE` cannot pass for a line of output."""
    return name if name.isprintable() else name.encode("unicode_escape").decode("ascii")


def tracked_only(tracked: frozenset[str] | None) -> Callable[[str], bool]:
    """Whether a repo-relative posix path ('' for the root) is seen: every one in a worktree at a commit
    (`tracked` None); in a working tree, the files of its commit and the directories that hold them."""
    if tracked is None:
        return lambda _rel: True
    shown = {"", *tracked}
    for path in tracked:  # each folder once: a path's walk up stops at a folder already shown (depth is no cost)
        end = path.rfind("/")
        while end > 0 and (folder := path[:end]) not in shown:
            shown.add(folder)
            end = path.rfind("/", 0, end)
    return frozenset(shown).__contains__


class Jail:
    """Resolves and reads paths of the checkout at `root` (resolved once), files up to `max_file_bytes`;
    `tracked`: the files a working tree shows (see the module doc), None for a worktree at a commit."""

    def __init__(self, root: Path, max_file_bytes: int, tracked: frozenset[str] | None = None) -> None:
        self.root = root.resolve()
        self.max_file_bytes = max_file_bytes
        self.visible = tracked_only(tracked)

    def resolve(self, path: str) -> tuple[Path, str]:
        """The real path inside the jail and its repo-relative posix form ('' for the root)."""
        if not isinstance(path, str):
            raise Refused("path must be a string")
        if "\x00" in path:
            raise Refused("path contains a NUL byte")
        raw = path.strip().replace("\\", "/")
        if raw.startswith("/") or (len(raw) > 1 and raw[0].isalpha() and raw[1] == ":"):
            raise Refused(
                f"absolute paths are not allowed ({path!r}); give a path relative to the "
                "repository root, e.g. 'src/app.py' (use grep_files to find a file by name)"
            )
        parts = PurePosixPath(raw).parts if raw not in ("", ".") else ()
        if ".git" in parts:
            raise Refused("the .git directory is not readable")
        real = self._real(self.root / raw, path)
        if not real.is_relative_to(self.root):
            raise Refused(f"path {path!r} leads outside the repository")
        rel = real.relative_to(self.root)
        if ".git" in rel.parts:
            raise Refused("the .git directory is not readable")
        shown = rel.as_posix() if rel.parts else ""
        if not self.visible(shown):
            raise Refused(f"{path!r} is not in the commit: only the commit's files are read")
        return real, shown

    def inside(self, path: str) -> bool:
        """Whether repo-relative `path` names something that resolves inside the checkout."""
        try:
            self.resolve(path)
        except Refused:
            return False
        return True

    def read_text(self, real: Path, shown: str) -> str:
        """A regular file's text (UTF-8, undecodable bytes replaced); FileNotFoundError when it is missing."""
        try:
            mode = real.stat()  # before opening: opening a device can itself do something
        except FileNotFoundError:
            raise
        except OSError as error:
            raise Refused(_open_error(shown, error)) from None
        self.check_regular(mode, shown)
        if mode.st_size > self.max_file_bytes:
            raise Refused(f"{shown!r} is too large ({mode.st_size} bytes; limit {self.max_file_bytes})")
        try:
            # Non-blocking, should a FIFO have been swapped in since: it would wait for a writer forever.
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
        except OSError as error:
            raise Refused(_open_error(shown, error)) from None
        with os.fdopen(fd, "rb") as handle:
            self.check_regular(os.fstat(fd), shown)
            data = handle.read(self.max_file_bytes + 1)  # a file growing while read is still capped
        if len(data) > self.max_file_bytes:
            raise Refused(f"{shown!r} is too large (over {self.max_file_bytes} bytes)")
        if b"\x00" in data[:_BINARY_SNIFF_BYTES]:
            raise Refused(f"{shown!r} is a binary file")
        return data.decode("utf-8", errors="replace")

    @staticmethod
    def check_regular(mode: os.stat_result, shown: str) -> None:
        """Refuse anything but a regular file, naming what it is."""
        for test, what in _KINDS:
            if test(mode.st_mode):
                raise Refused(f"{shown!r} is {what}")
        if not stat.S_ISREG(mode.st_mode):
            raise Refused(f"{shown!r} is not a regular file")

    def files(self, top: Path, suffixes: tuple[str, ...], skip_dirs: set[str], limit: int) -> Iterator[Path]:
        """Regular files under `top` ending in one of `suffixes`, walking no symlinked directory, at most
        `limit`; symlinked files count when they lead to a regular file inside the jail."""
        found = 0
        for dirpath, dirnames, filenames in os.walk(top):  # does not follow symlinked directories
            folder = Path(dirpath).relative_to(self.root).as_posix()
            prefix = "" if folder == "." else f"{folder}/"
            dirnames[:] = [d for d in dirnames if d not in skip_dirs and self.visible(prefix + d)]
            for name in filenames:
                if not name.lower().endswith(suffixes) or not self.visible(prefix + name):
                    continue
                candidate = Path(dirpath) / name
                if self._regular_inside(candidate):
                    yield candidate
                    found += 1
                    if found >= limit:
                        return

    def _regular_inside(self, candidate: Path) -> bool:
        try:
            mode = candidate.lstat()
            if stat.S_ISLNK(mode.st_mode):
                real = candidate.resolve(strict=True)
                if not real.is_relative_to(self.root) or ".git" in real.relative_to(self.root).parts:
                    return False
                mode = real.stat()
        except (OSError, RuntimeError):  # vanished, unreadable, a symlink loop
            return False
        return stat.S_ISREG(mode.st_mode)

    @staticmethod
    def _real(candidate: Path, shown: str) -> Path:
        try:
            return candidate.resolve()
        except RuntimeError:  # Python 3.11 reports a symlink loop so; later versions raise OSError(ELOOP)
            raise Refused(f"{shown!r} is a symlink loop") from None
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise Refused(f"{shown!r} is a symlink loop") from None
            raise Refused(f"cannot resolve {shown!r}: {error.strerror or type(error).__name__}") from None


def _open_error(shown: str, error: OSError) -> str:
    if error.errno == errno.ELOOP:
        return f"{shown!r} is a symlink loop"
    if error.errno in (errno.ENXIO, errno.EOPNOTSUPP):  # opening a socket
        return f"{shown!r} is a socket, not a regular file"
    return f"cannot read {shown!r}: {error.strerror or type(error).__name__}"
