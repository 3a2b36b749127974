"""A hostile repository: the file tools answer with a status and a message, never raise and never hang.

The repository is real, with real commits holding symlink loops, symlinks out of the tree (to a file and
to a directory) and a file over the size limit; its working tree (what `analyze --repo` reads without
`--commit`) also holds a FIFO, a socket, a device node and an unreadable file, which git cannot commit.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from analysis.code.filemap import FileIndex
from analysis.code.localiser import find_suspects
from analysis.code.repo import RepoConfig, RepoSpec, RepoSync, open_local
from analysis.code.tools import FileTools, ToolLimits
from analysis.code.validate import validate_citations, validate_location
from analysis.event import ErrorEvent, ExceptionInfo, Frame
from analysis.report import CitationRef, Location
from tests.gitrepo import GitRepo
from tests.paths import PROJECT_ROOT

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

# A None dereference whose callee the localiser then greps the whole tree for.
_APP = "def find(order_id):\n    return None\n\n\ndef handler(order_id):\n    return find(order_id).total  # culprit\n"
_LIMIT = 100_000


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[GitRepo]:
    """A repository whose commit holds loops, links out and a huge file; its working tree has more."""
    repo = GitRepo(tmp_path / "repo")
    repo.write({"src/app.py": _APP, "src/big.py": "x = 1\n" * (_LIMIT // 6 + 10), "docs/readme.md": "ok\n"})
    for name, target in (("loop_a", "loop_b"), ("loop_b", "loop_a"), ("src/self.py", "self.py"),
                         ("src/leak.py", "/etc/passwd"), ("src/etc", "/etc"), ("src/alias.py", "app.py")):
        (repo.path / name).symlink_to(target)
    repo.commit("a repository with hostile entries")
    os.mkfifo(repo.path / "src/pipe.py")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(repo.path / "src/sock.py"))
    (repo.path / "src/locked.py").write_text("handler = None\n")
    (repo.path / "src/locked.py").chmod(0)
    if os.geteuid() == 0:  # creating device nodes needs root; /dev itself is checked below either way
        os.mknod(repo.path / "src/dev.py", stat.S_IFCHR | 0o644, os.makedev(1, 3))
    try:
        yield repo
    finally:
        server.close()


def tools_for(repo: GitRepo) -> FileTools:
    checkout = open_local(repo.path)
    return FileTools(checkout.root, ToolLimits(max_file_bytes=_LIMIT), repo_dir=checkout.repo_dir,
                     commit=checkout.commit)


class TestReadFile:
    @pytest.mark.parametrize(("path", "says"), [
        ("loop_a", "symlink loop"),
        ("src/self.py", "symlink loop"),
        ("src/leak.py", "leads outside the repository"),
        ("src/etc/passwd", "leads outside the repository"),
        ("src/big.py", "too large"),
        ("src/pipe.py", "named pipe (FIFO)"),
        ("src/sock.py", "a socket"),
        ("src", "a directory"),
    ])
    def test_each_hostile_entry_gets_an_error_that_names_it(self, hostile: GitRepo, path: str, says: str) -> None:
        """A loop, a way out, a huge file, a FIFO (no hang), a socket, a directory: status error, and why."""
        result = tools_for(hostile).read_file(path)
        assert result.status == "error" and says in result.output, result.output
        assert "root:" not in result.output

    def test_a_device_node_is_refused_without_reading_it(self, hostile: GitRepo) -> None:
        """A character device (in the tree when the test may create one, and /dev's own) is never opened."""
        if (hostile.path / "src/dev.py").exists():
            result = tools_for(hostile).read_file("src/dev.py")
            assert result.status == "error" and "character device" in result.output
        for device in ("zero", "null", "urandom", "tty"):
            result = FileTools(Path("/dev")).read_file(device)
            assert result.status == "error" and "device" in result.output, result.output

    def test_an_unreadable_file_says_permission_denied(self, hostile: GitRepo) -> None:
        """Without the right to read it (root drops its override capabilities for the check), status error."""
        child = (
            "import json, sys\nfrom analysis.code.tools import FileTools\n"
            "tools = FileTools(__import__('pathlib').Path(sys.argv[1]))\n"
            "read, grep = tools.read_file('src/locked.py'), tools.grep_files('handler')\n"
            "print(json.dumps([read.status, read.output, grep.status, sorted({m.path for m in grep.data or ()})]))\n"
        )
        argv = [sys.executable, "-c", child, str(hostile.path)]
        if os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            assert setpriv, "setpriv (util-linux) is needed to read as root without CAP_DAC_OVERRIDE"
            argv = [setpriv, "--bounding-set=-dac_override,-dac_read_search", *argv]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT, check=False)
        assert proc.returncode == 0, proc.stderr
        read_status, read_output, grep_status, grep_paths = json.loads(proc.stdout)
        assert read_status == "error" and "Permission denied" in read_output
        assert grep_status == "ok" and grep_paths == ["src/app.py"]  # the unreadable file is skipped

    def test_a_symlink_inside_the_tree_still_reads(self, hostile: GitRepo) -> None:
        """Hostile entries do not make ordinary ones unreadable: a link to a file of the tree is followed."""
        result = tools_for(hostile).read_file("src/alias.py")
        assert result.status == "ok" and "return find(order_id).total" in result.output


class TestGrepListHistory:
    def test_grep_over_the_whole_tree_finds_the_real_files_and_counts_the_rest(self, hostile: GitRepo) -> None:
        """grep walks past loops, links out, the FIFO, the socket and the device, and says it skipped some."""
        result = tools_for(hostile).grep_files("order_id", file_extension="py")
        assert result.status == "ok"
        assert {m.path for m in result.data or ()} == {"src/app.py"}
        assert "files not read" in result.output

    @pytest.mark.parametrize("path", ["loop_a", "src/self.py", "src/leak.py", "src/pipe.py", "src/sock.py"])
    def test_grep_on_a_hostile_path_is_an_answer(self, hostile: GitRepo, path: str) -> None:
        """Aimed straight at a hostile entry, grep refuses or finds nothing; it never blocks or raises."""
        result = tools_for(hostile).grep_files("x", path=path)
        assert result.status in ("error", "no_data") and result.output

    def test_list_directory_shows_the_entries_without_following_them(self, hostile: GitRepo) -> None:
        """Listing the tree names every entry; listing into a loop or out of the tree is refused."""
        tools = tools_for(hostile)
        listing = tools.list_directory("src")
        assert listing.status == "ok" and {"app.py", "pipe.py", "self.py", "leak.py"} <= set(listing.data or ())
        assert tools.list_directory("loop_a").status == "error"
        assert tools.list_directory("src/etc").status == "error"

    @pytest.mark.parametrize("path", ["loop_a", "src/self.py", "src/leak.py", "src/alias.py", "src/pipe.py",
                                      "src/big.py", "src/etc"])
    def test_git_log_and_blame_answer_for_every_hostile_path(self, hostile: GitRepo, path: str) -> None:
        """History tools resolve through the same jail and read git objects: a loop, a link or a special file
        is an error or no data with a message, never an exception."""
        tools = tools_for(hostile)
        for result in (tools.git_log(path), tools.blame(path, 1, 2)):
            assert result.status in ("ok", "no_data", "error") and result.output
        blamed = tools.blame("src/alias.py", 6, 6)  # a link inside the tree is blamed as the file it names
        assert blamed.status == "ok"
        assert [row.text for row in blamed.data or ()] == ["    return find(order_id).total  # culprit"]


class TestSuspectsAndCulprits:
    def test_a_symlink_out_of_the_tree_is_never_a_suspect(self, hostile: GitRepo) -> None:
        """Frames naming the link to /etc/passwd and a FIFO map to no file; the real frame stays the culprit."""
        index = FileIndex.build(hostile.path, ())
        assert "src/app.py" in index and "src/alias.py" in index
        for path in ("src/leak.py", "src/self.py", "loop_a", "src/pipe.py", "src/sock.py", "src/etc/passwd"):
            assert path not in index
        frames = (Frame(function="read", filename="src/leak.py", lineno=1, in_app=True),
                  Frame(function="drain", filename="src/pipe.py", lineno=1, in_app=True),
                  Frame(function="handler", filename="src/app.py", lineno=6, in_app=True))
        event = ErrorEvent(server_id="shop", timestamp=1.0, message="boom",
                           exceptions=(ExceptionInfo(type="AttributeError", value="boom", frames=frames),))
        findings = find_suspects(event, tools_for(hostile))
        assert [s.path for s in findings.suspects] == ["src/app.py"]

    def test_a_committed_symlink_is_no_culprit_nor_citation(self, hostile: GitRepo) -> None:
        """The model naming the link (its blob is the name /etc/passwd) gets the location and citation dropped."""
        checkout = open_local(hostile.path)
        location, why = validate_location(Location(path="src/leak.py", line=1), checkout)
        assert location is None and why
        kept, dropped = validate_citations([CitationRef(path="src/leak.py", start_line=1, end_line=1)], checkout)
        assert kept == [] and dropped


class TestClones:
    def test_servers_whose_ids_clean_alike_get_their_own_clones(self, tmp_path: Path) -> None:
        """`team/pay` and `team_pay` once shared a bare clone, so one was analysed with the other's code."""
        first, second = GitRepo(tmp_path / "first"), GitRepo(tmp_path / "second")
        first.commit("first", {"app.py": "FIRST = 1\n"})
        second.commit("second", {"app.py": "SECOND = 2\n"})
        servers = {"team/pay": RepoSpec(url=str(first.path)), "team_pay": RepoSpec(url=str(second.path)),
                   "Team_Pay": RepoSpec(url=str(second.path))}
        sync = RepoSync(RepoConfig(cache_dir=tmp_path / "cache", servers=servers), environ={})
        slash, underscore = sync.checkout("team/pay", None), sync.checkout("team_pay", None)
        assert (slash.root / "app.py").read_text() == "FIRST = 1\n"
        assert (underscore.root / "app.py").read_text() == "SECOND = 2\n"
        dirs = {sync.repo_dir(server).name.lower() for server in servers}
        assert len(dirs) == 3 and all(name.startswith("team_pay-") for name in dirs)


class TestAnalyzeWorkingTree:
    def test_analyze_without_commit_is_not_held_by_a_fifo(self, hostile: GitRepo, tmp_path: Path) -> None:
        """`logagent analyze --repo` on the working tree, with a frame naming the FIFO: it answers, exit 0."""
        # A None dereference: the localiser also greps the whole tree for the callee's definition.
        message = "'NoneType' object has no attribute 'total'"
        event = {"server_id": "shop", "timestamp": 1.0, "message": message, "exception": {
            "type": "AttributeError", "value": message, "stacktrace": [  # caller first, as Sentry sends them
                {"function": "drain", "filename": "src/pipe.py", "lineno": 1, "in_app": True},
                {"function": "handler", "filename": "src/app.py", "lineno": 6, "in_app": True}]}}
        script = Path(sys.executable).parent / "logagent"
        argv = [str(script)] if script.exists() else [sys.executable, "-m", "consumer.cli"]
        clean = {k: v for k, v in os.environ.items() if not k.startswith("LOGAGENT_")}
        proc = subprocess.run([*argv, "analyze", "--repo", str(hostile.path), "--offline"],
                              input=json.dumps(event).encode(), capture_output=True, timeout=60, check=False,
                              cwd=PROJECT_ROOT, env={**clean, "LOGAGENT_DATA_DIR": str(tmp_path / "data")})
        assert proc.returncode == 0, proc.stderr.decode()
        out = json.loads(proc.stdout)
        assert out["culprit"]["path"] == "src/app.py"
        assert [(s["path"], s["line"]) for s in out["suspects"]][-1] == ("src/app.py", 1)  # `find`, found by grep
