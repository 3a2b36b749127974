"""The compiled redaction prefilter kept in the user's cache directory (`analysis.intake.disk_cache`), read
back by the next start, and never from where another user could have put it."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hyperscan
import pytest

from analysis.intake import disk_cache, redact
from analysis.intake.redact import (
    _EVERY_RULE_CHARS,
    RedactionConfig,
    Redactor,
    _Prefilter,
)
from analysis.intake.redact_rules import RULES, Rule
from consumer.notify.service import run_notify
from consumer.runner import run_service
from consumer.settings import Settings

_CACHE_TEXTS = ("password=hunter2 from bob@example.com", "AKIAIOSFODNN7EXAMPLE at 203.0.113.9", "nothing here")
# The rules these texts hit: the cache treats any database alike, and all the rules take 3-5 s to compile.
_RULES = tuple(rule for rule in RULES if rule.kind in ("aws_access_key", "email", "ipv4"))


@pytest.fixture
def private() -> Iterator[Path]:
    """A directory no other user can reach, where the cache may be used: under this user's home (one under
    `/tmp`, writable by everyone, never is)."""
    where = Path.home() / f".logagent-test-{uuid.uuid4().hex}"
    for directory in (*reversed(where.parents), ):
        found = directory.stat()
        if not disk_cache.safe_directory(found, last=False):
            pytest.fail(f"these tests need a HOME no other user may write: {directory} is not root's or this "
                        "user's, or others may write it")
    where.mkdir(mode=0o700)
    try:
        yield where
    finally:
        shutil.rmtree(where)


def _compiled(rules: tuple[Rule, ...], pem: bool = False) -> Any:
    """The database a start gets for `rules` (read back from the cache, or compiled), once it is kept there."""
    prefilter = _Prefilter(rules, pem)
    database = prefilter.wait()
    if prefilter._thread is not None:
        prefilter._thread.join()  # the database is handed out first, then kept in the cache
    return database


def _scan(database: object, text: str) -> list[int]:
    hits: list[int] = []
    database.scan(text.encode(), lambda rule, *_: hits.append(rule), scratch=hyperscan.Scratch(database))  # type: ignore[attr-defined]
    return sorted(hits)


class TestPrefilterCache:
    """The compiled prefilter is kept in the user's cache directory and read back by the next start."""

    def _cached(self, root: Path) -> Path:
        (path,) = (root / "logagent").glob("prefilter-*.hsdb")
        return path

    def test_a_compile_is_read_back(self, private: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("XDG_CACHE_HOME", str(private))
        compiled = _compiled(_RULES)
        first = self._cached(private).stat()
        loaded = _compiled(_RULES)
        again = self._cached(private).stat()
        assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)  # read, not rewritten
        assert [_scan(loaded, text) for text in _CACHE_TEXTS] == [_scan(compiled, text) for text in _CACHE_TEXTS]
        assert _scan(loaded, _CACHE_TEXTS[0])  # the texts do hit rules
        _compiled(_RULES[:-1])  # other expressions: a file of their own
        assert len(list((private / "logagent").glob("prefilter-*.hsdb"))) == 2

    def test_only_the_newest_databases_stay(self, private: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Each change of the rules (a company pattern, an upgrade) compiles a database of its own: only the
        8 written last stay, and nothing but this user's own files of that kind is ever removed."""
        monkeypatch.setenv("XDG_CACHE_HOME", str(private))
        directory = private / "logagent"
        directory.mkdir(mode=0o700)
        other = directory / "notes.txt"
        other.write_text("kept")
        target = private / "target.hsdb"
        target.write_text("kept")
        (directory / "prefilter-link.hsdb").symlink_to(target)
        written: list[str] = []
        for count in range(1, 12):
            before = {p.name for p in directory.iterdir()}
            _compiled(RULES[:count])
            (new,) = {p.name for p in directory.iterdir()} - before
            written.append(new)
        databases = {p.name for p in directory.glob("prefilter-*.hsdb") if not p.is_symlink()}
        assert databases == set(written[-8:])
        # A part file left by a process killed mid-write goes once it is an hour old; one being written stays.
        stale, fresh = directory / f"{written[-1]}.4242", directory / f"{written[-1]}.4343"
        for part in (stale, fresh):
            part.write_bytes(b"half a database")
        os.utime(stale, (time.time() - 7200, time.time() - 7200))
        _compiled(RULES[:12])
        assert not stale.exists() and fresh.exists()
        assert other.read_text() == "kept" and (directory / "prefilter-link.hsdb").is_symlink()
        assert target.read_text() == "kept"

    def test_a_damaged_file_is_compiled_again(self, private: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("XDG_CACHE_HOME", str(private))
        expected = [_scan(_compiled(_RULES), text) for text in _CACHE_TEXTS]
        path = self._cached(private)
        for damage in (b"", b"not a database", path.read_bytes()[: path.stat().st_size // 2]):
            path.write_bytes(damage)
            assert [_scan(_compiled(_RULES), text) for text in _CACHE_TEXTS] == expected
            assert path.stat().st_size > 1000  # written whole again

    def test_a_file_others_may_write_is_not_read(self, private: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A database that names no rule would turn redaction off: one that another user could have put
        there (the file or its directory writable by others) is compiled again instead."""
        monkeypatch.setenv("XDG_CACHE_HOME", str(private))
        expected = [_scan(_compiled(_RULES), text) for text in _CACHE_TEXTS]
        path = self._cached(private)
        assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
        for where in (path, path.parent):
            path.write_bytes(_blind())
            path.chmod(0o600)
            where.chmod(0o777 if where.is_dir() else 0o666)
            assert [_scan(_compiled(_RULES), text) for text in _CACHE_TEXTS] == expected
            where.chmod(0o700 if where.is_dir() else 0o600)
        path.unlink()
        path.parent.chmod(0o777)  # nothing is written into a directory others may write
        _compiled(_RULES)
        assert not list(path.parent.iterdir())

    def test_a_cache_that_cannot_be_written_is_left_alone(self, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
        blocker = tmp_path / "file"
        blocker.write_text("")
        monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # a file where the directory would go
        assert _scan(_compiled(_RULES), _CACHE_TEXTS[0])
        assert blocker.read_text() == ""

    def test_a_relative_cache_home_is_ignored(self, private: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """As the XDG spec says: a relative `XDG_CACHE_HOME` would scatter caches over working directories."""
        monkeypatch.chdir(private)
        (private / "home").mkdir(mode=0o700)
        monkeypatch.setenv("HOME", str(private / "home"))
        monkeypatch.setenv("XDG_CACHE_HOME", "relative")
        _compiled(_RULES)
        assert not (private / "relative").exists()
        assert self._cached(private / "home" / ".cache")

    def test_a_missing_home_is_not_made(self, private: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Only the cache home and `logagent` are made: a service user's HOME of `/nonexistent` stays so
        (first review: root made `/nonexistent/.cache`), and a read makes nothing."""
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
        monkeypatch.setenv("HOME", str(private / "nonexistent"))
        assert disk_cache.read("anything") is None
        assert _scan(_compiled(_RULES), _CACHE_TEXTS[0])
        assert not (private / "nonexistent").exists()

    def test_links_on_the_way(self, private: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """This user's own link is followed (`/home -> /var/home`); another user's is not, even to a directory
        of this user's holding a database that names no rule (attacker review: a link planted as `.cache`
        in a shared HOME); a loop of links ends the walk, not the start."""
        elsewhere = private / "elsewhere"
        elsewhere.mkdir(mode=0o700)
        home = private / "home"
        home.mkdir(mode=0o700)
        (home / ".cache").symlink_to(elsewhere)
        monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
        expected = [_scan(_compiled(_RULES), text) for text in _CACHE_TEXTS]
        written = self._cached(elsewhere)  # through this user's link
        blind = _blind()
        written.write_bytes(blind)
        if os.geteuid() == 0:  # only root can make a link another user owns
            os.lchown(home / ".cache", 65534, 65534)
            assert [_scan(_compiled(_RULES), text) for text in _CACHE_TEXTS] == expected
            assert written.read_bytes() == blind  # neither read nor rewritten through it
        (home / "loop").symlink_to(home / "loop")
        monkeypatch.setenv("XDG_CACHE_HOME", str(home / "loop"))
        assert [_scan(_compiled(_RULES), text) for text in _CACHE_TEXTS] == expected

    def test_the_walk_must_end_on_a_directory_of_this_users_own(self, private: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
        """`logagent` as a link to a directory others may write (`/tmp`-like), to `x/..` of one, or to `/`:
        the walk ended there with only the checks of a directory on the way (third review), and wrote there."""
        sticky = private / "sticky"
        sticky.mkdir()
        sticky.chmod(0o1777)
        (sticky / "x").mkdir(mode=0o700)
        home = private / "home"
        home.mkdir(mode=0o700)
        monkeypatch.setenv("XDG_CACHE_HOME", str(home))
        expected = [_scan(_compiled(_RULES), text) for text in _CACHE_TEXTS]
        (home / "logagent").rename(home / "kept")
        for target in (sticky, sticky / "x" / "..", Path("/")):
            (home / "logagent").unlink(missing_ok=True)
            (home / "logagent").symlink_to(target)
            assert [_scan(_compiled(_RULES), text) for text in _CACHE_TEXTS] == expected, target
        assert not list(sticky.glob("prefilter-*")) and not list(Path("/").glob("prefilter-*"))
        (home / "logagent").unlink()
        (home / "logagent").symlink_to("p/q")  # a link's missing target is not made (third review)
        _compiled(_RULES)
        assert not (home / "p").exists()

    def test_a_directory_others_may_write_is_never_on_the_way(self, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
        """Not even a sticky one (`/tmp`): there another user may add a link to `.` (root's `/usr/bin/X11`,
        hard-linked), mount FUSE over a directory of theirs, or keep such an entry until root's original
        goes (third and fourth reviews). A HOME there gets no cache, and nothing is written."""
        assert tmp_path.parents[-2].stat().st_mode & 0o1777 == 0o1777  # pytest's directories are under /tmp
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        assert _scan(_compiled(_RULES), _CACHE_TEXTS[0])
        assert not (tmp_path / "cache").exists()

    def test_a_file_with_another_name_is_not_read(self, private: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("XDG_CACHE_HOME", str(private))
        expected = [_scan(_compiled(_RULES), text) for text in _CACHE_TEXTS]
        written = self._cached(private)
        written.write_bytes(_blind())
        os.link(written, private / "backup")  # a second name: compiled again, the file replaced
        assert [_scan(_compiled(_RULES), text) for text in _CACHE_TEXTS] == expected
        assert written.stat().st_nlink == 1 and written.read_bytes() != _blind()

    def test_no_directory_on_the_way_may_be_on_fuse(self, private: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
        """A FUSE mount reports any owner and mode and hides what it is mounted on (fifth review: another
        user's, with `allow_other`, over a group-writable directory on the way): a directory on FUSE, or a
        mount table that cannot be read, and the cache is not used."""
        found = private.stat()
        table = tmp_path / "mountinfo"
        table.write_bytes(b"22 27 0:21 / /proc rw,relatime - proc proc rw\n"
                          b"75 27 %d:%d / /srv/t\xff rw,nosuid - fuse.bindfs src rw,user_id=33,allow_other\n"
                          % (os.major(found.st_dev), os.minor(found.st_dev)) + b"garbage\n- \n")
        assert disk_cache.fuse_devices(table) == {found.st_dev}  # a name that is no UTF-8 too
        assert disk_cache.fuse_devices(tmp_path / "absent") is None
        assert disk_cache.fuse_devices() is not None  # this machine's own table reads
        monkeypatch.setenv("XDG_CACHE_HOME", str(private / "cache"))
        for table_says in ({found.st_dev}, None):
            monkeypatch.setattr(disk_cache, "fuse_devices", lambda says=table_says: says)
            assert _scan(_compiled(_RULES), _CACHE_TEXTS[0])
            assert not list((private / "cache").glob("logagent/prefilter-*"))
        monkeypatch.setattr(disk_cache, "fuse_devices", lambda: set())
        _compiled(_RULES)
        assert self._cached(private / "cache")  # the same walk, no FUSE: used

    def test_nothing_is_made_in_a_directory_of_someone_else(self, private: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
        """Root with another user's HOME (`sudo -E`) must not leave a root-owned `.cache` there; a user never
        makes one in a directory of root's."""
        if os.geteuid() == 0:
            theirs = private / "theirs"
            theirs.mkdir()
            os.chown(theirs, 65534, 65534)
            root = theirs / ".cache"
        else:
            root = Path("/") / f"logagent-{uuid.uuid4().hex}"  # `/` is root's
        monkeypatch.setenv("XDG_CACHE_HOME", str(root))
        assert _scan(_compiled(_RULES), _CACHE_TEXTS[0])
        assert not root.exists()

    def test_a_fifo_in_place_of_the_file_does_not_hold_the_start(self, private: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("XDG_CACHE_HOME", str(private))
        expected = [_scan(_compiled(_RULES), text) for text in _CACHE_TEXTS]
        path = self._cached(private)
        path.unlink()
        os.mkfifo(path, 0o600)
        assert disk_cache.read(path.name) is None
        assert [_scan(_compiled(_RULES), text) for text in _CACHE_TEXTS] == expected

    def test_no_home_no_cache(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """No HOME and no passwd entry (`env -i` under an arbitrary uid): Path.home raises; redaction works."""
        def homeless() -> Path:
            raise RuntimeError("Could not determine home directory.")
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
        monkeypatch.setattr(Path, "home", homeless)
        assert _scan(_compiled(_RULES), _CACHE_TEXTS[0])
        assert disk_cache.read("anything") is None

    def test_which_directories_on_the_way_are_safe(self) -> None:
        """Owned by this user or root and writable by no one else (a sticky `/tmp` included); the cache
        directory itself only this user's."""
        uid, other = os.geteuid(), 65534 if os.geteuid() != 65534 else 65533

        def state(mode: int, owner: int) -> os.stat_result:
            return os.stat_result((mode, 0, 0, 1, owner, 0, 0, 0, 0, 0))

        on_the_way = {(0o40755, 0): True, (0o40755, uid): True, (0o41777, 0): False, (0o40777, 0): False,
                      (0o41777, other): False, (0o40755, other): False, (0o40775, uid): False}
        for (mode, owner), safe in on_the_way.items():
            assert disk_cache.safe_directory(state(mode, owner), last=False) is safe, (oct(mode), owner)
        last = {(0o40700, uid): True, (0o40755, uid): True, (0o41777, uid): False, (0o40700, other): False}
        for (mode, owner), safe in last.items():
            assert disk_cache.safe_directory(state(mode, owner), last=True) is safe, (oct(mode), owner)


class TestCompiledInTheBackground:
    """A prefilter not in the cache compiles in a thread; meanwhile a text reads as every rule reads it."""

    def test_texts_are_read_by_every_rule_until_the_database_is_there(self, private: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("XDG_CACHE_HOME", str(private))
        release = threading.Event()

        class Held(hyperscan.Database):  # type: ignore[misc,name-defined]
            def compile(self, **kwargs: object) -> None:
                assert release.wait(60), "the test never released the compile"
                super().compile(**kwargs)

        monkeypatch.setattr(hyperscan, "Database", Held)
        prefilter = _Prefilter(RULES, pem=True)
        every = list(range(len(RULES) + 1))
        try:
            assert prefilter.hits("nothing here") == every
            redactor = Redactor()
            monkeypatch.setattr(redactor, "_prefilter", prefilter)
            for text in (*_CACHE_TEXTS, "Authorization: Bearer abcdefgh12345678 status=401",
                         "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----"):
                assert redactor.redact(text) == redactor.every_rule(text), text
            assert "[REDACTED:" in redactor.redact(_CACHE_TEXTS[0])
            long_hits: list[list[int]] = []
            waiting = threading.Thread(target=lambda: long_hits.append(prefilter.hits("x" * (_EVERY_RULE_CHARS + 1))))
            waiting.start()
            waiting.join(0.3)
            assert waiting.is_alive(), "a long text read every rule instead of waiting for the database"
            assert not list(private.glob("logagent/prefilter-*"))
        finally:
            release.set()
        waiting.join(60)
        assert prefilter.wait() is not None and prefilter._thread is not None
        prefilter._thread.join(60)  # the database is handed out first, then kept in the cache
        assert long_hits == [[]]
        assert len(list(private.glob("logagent/prefilter-*.hsdb"))) == 1
        assert prefilter.hits("nothing here") != every
        assert prefilter.hits(_CACHE_TEXTS[0]) == _scan(_compiled(RULES, pem=True), _CACHE_TEXTS[0])

    def test_a_failed_compile_is_raised_to_the_next_redaction(self, private: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
        """A log record's text is redacted while its handler's lock is held: a long one waits for the compile
        there. The compile thread logging its failure then waited for that lock, and both waited for ever
        (attacker review). It logs nothing; the failure is raised to whoever redacts next, as it was at start."""
        monkeypatch.setenv("XDG_CACHE_HOME", str(private))
        release = threading.Event()

        class Failing(hyperscan.Database):  # type: ignore[misc,name-defined]
            def compile(self, **kwargs: object) -> None:
                assert release.wait(60), "the test never released the compile"
                raise MemoryError("no room to compile")

        monkeypatch.setattr(hyperscan, "Database", Failing)
        prefilter = _Prefilter(RULES, pem=True)
        raised: list[RuntimeError] = []

        class Redacting(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                try:
                    prefilter.hits(record.getMessage())
                except RuntimeError as error:
                    raised.append(error)

        logger, handler = logging.getLogger(redact.__name__), Redacting()
        logger.addHandler(handler)
        try:
            writer = threading.Thread(target=lambda: logger.warning("A" * (_EVERY_RULE_CHARS + 1)), daemon=True)
            writer.start()
            writer.join(0.3)
            release.set()
            writer.join(10)
            assert not writer.is_alive(), "the log record's redaction and the compile wait for each other"
        finally:
            release.set()
            logger.removeHandler(handler)
        assert len(raised) == 1 and isinstance(raised[0].__cause__, MemoryError)
        with pytest.raises(RuntimeError, match="did not compile"):
            prefilter.hits("nothing here")
        assert not list(private.glob("logagent/prefilter-*"))

    @pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
    def test_a_compile_stopped_short_is_compiled_again(self, private: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A compile ended by what is no error (Ctrl-C in a forked child's compile) left the database missing
        and the prefilter ready: every later redaction failed on it (second attacker review)."""
        monkeypatch.setenv("XDG_CACHE_HOME", str(private))
        calls: list[int] = []

        class Interrupted(hyperscan.Database):  # type: ignore[misc,name-defined]
            def compile(self, **kwargs: object) -> None:
                calls.append(1)
                if len(calls) == 1:
                    raise KeyboardInterrupt
                super().compile(**kwargs)

        monkeypatch.setattr(hyperscan, "Database", Interrupted)
        prefilter = _Prefilter(RULES, pem=False)
        assert prefilter.wait() is not None and len(calls) == 2
        assert prefilter.hits(_CACHE_TEXTS[0]) == _scan(_compiled(RULES), _CACHE_TEXTS[0])

    def test_a_service_waits_for_the_database_before_it_starts(self, private: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
        """`logagent run` and `logagent notify` call `Redactor.ready` first: a compile that fails stops the
        start, as it did in the constructor, rather than the first redaction of a running service."""
        monkeypatch.setenv("XDG_CACHE_HOME", str(private))

        class Failing(hyperscan.Database):  # type: ignore[misc,name-defined]
            def compile(self, **kwargs: object) -> None:
                raise hyperscan.error("out of memory")

        monkeypatch.setattr(hyperscan, "Database", Failing)
        settings = Settings(redaction=RedactionConfig(kinds=("email", "ipv4")))
        redact._prefilter.cache_clear()
        try:
            for start in (run_service, run_notify):
                with pytest.raises(RuntimeError, match="did not compile"):
                    start(settings)
        finally:
            redact._prefilter.cache_clear()

    def test_a_process_forked_while_it_compiles_compiles_for_itself(self, private: Path) -> None:
        """The thread is not in the child: a long text there waited for it for ever, or read no rule at all."""
        script = ("import os, sys\n"
                  "from analysis.intake.redact import _Prefilter\n"
                  "from analysis.intake.redact_rules import RULES\n"
                  "prefilter = _Prefilter(RULES, pem=False)\n"
                  "pid = os.fork()\n"
                  "if pid == 0:\n"
                  "    found = prefilter.hits('password=hunter2 ' + 'x' * 20000)\n"
                  "    os._exit(0 if found and found != list(range(len(RULES))) else 3)\n"
                  "assert prefilter.wait() is not None\n"
                  "sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n")
        run = subprocess.run([sys.executable, "-c", script], env={**os.environ, "XDG_CACHE_HOME": str(private)},
                             capture_output=True, text=True, timeout=120, check=False)
        assert run.returncode == 0, run.stderr[-2000:]

    def test_a_run_that_ends_first_still_leaves_the_database(self, private: Path) -> None:
        """The compile's thread is no daemon: a command that redacts one text and exits (the image's build
        step, `logagent fingerprint` of one line) leaves the database for the next start."""
        run = subprocess.run([sys.executable, "-c", "from analysis.intake.redact import Redactor; "
                              "print(Redactor().redact('password=hunter2 from bob@example.com'))"],
                             env={**os.environ, "XDG_CACHE_HOME": str(private)}, capture_output=True, text=True,
                             timeout=120, check=True)
        assert run.stdout == "password=[REDACTED:secret] from [REDACTED:email]\n"
        assert len(list(private.glob("logagent/prefilter-*.hsdb"))) == 1


def _blind() -> bytes:
    """A database that matches none of the texts."""
    blind = hyperscan.Database()
    blind.compile(expressions=[b"zzzzzzzz"], ids=[0], flags=[hyperscan.HS_FLAG_SINGLEMATCH])
    return hyperscan.dumpb(blind)
