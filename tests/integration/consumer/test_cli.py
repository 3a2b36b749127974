"""`logagent` as a user runs it: a real process, real sample repositories, real events."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from analysis.errors import BadInput
from analysis.intake.decode import DecodeConfig
from analysis.intake.quick_key import full_keys
from analysis.intake.redact import Redactor
from analysis.report import Analysis
from demo.services import SampleService, build_sample_repos
from demo.stream import SampleMessage, SampleStream, build_stream
from tests.conftest import SECRETS, SHOP_PY, shop_line
from tests.gitrepo import GitRepo, git
from tests.paths import PROJECT_ROOT
from tests.terminal import COLOUR, clean_env, run, run_on_terminal

pytestmark = pytest.mark.integration

_ROOT = PROJECT_ROOT


def logagent(
    *args: str, stdin: bytes = b"", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run the CLI: the installed console script when there is one, else the same module."""
    script = Path(sys.executable).parent / "logagent"
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "consumer.cli"]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LOGAGENT_")}
    return subprocess.run([*argv, *args], input=stdin, capture_output=True, cwd=_ROOT, timeout=120,
                          env={**clean, **(env or {})}, check=False)


def _run_python(folder: Path, script: str) -> subprocess.CompletedProcess[str]:
    """`script` run for real in `folder` (without writing `__pycache__`, an untracked folder of its own)."""
    return subprocess.run([sys.executable, "-B", script], cwd=folder, capture_output=True, text=True, check=False)


def _one_error_line(proc: subprocess.CompletedProcess[bytes]) -> str:
    """The user error contract: exit code 2 and exactly one line on stderr, no traceback."""
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in lines[0]
    return lines[0]


def _service_fingerprint(line: bytes, config: DecodeConfig, redactor: Redactor) -> str | None:
    """The fingerprint the service counts the line's first record under; None for a line it rejects."""
    try:
        return full_keys(line, config, redactor, 0.0)[0].fingerprint
    except BadInput:
        return None


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SampleService]:
    return build_sample_repos(tmp_path_factory.mktemp("samples"))


@pytest.fixture(scope="module")
def stream(services: dict[str, SampleService]) -> SampleStream:
    return build_stream(services, n_events=600, seed=21)


def _first(stream: SampleStream, bug: str, shape: str, min_records: int = 1) -> SampleMessage:
    return next(m for m in stream.messages if m.bug == bug and m.shape == shape and m.records >= min_records)


class TestFingerprint:
    def test_one_output_line_per_input_line_in_order(self, stream: SampleStream) -> None:
        """Bad lines answer {"error": reason} in place, so output line N is always about input line N."""
        native = _first(stream, "customer-npe", "native")
        ecs = _first(stream, "customer-npe", "ecs")
        otel = _first(stream, "unknown-coupon", "otel", min_records=2)
        lines = [native.value, b"not json at all", ecs.value, b"", otel.value, b"[1, 2]"]
        proc = logagent("fingerprint", stdin=b"\n".join(lines) + b"\n")
        assert proc.returncode == 0, proc.stderr
        out = [orjson.loads(line) for line in proc.stdout.splitlines()]
        assert len(out) == len(lines)
        assert out[0]["basis"] == "stacktrace"
        assert out[0]["exception_type"] == "java.lang.NullPointerException"
        assert out[0]["frames"]
        assert out[2]["fingerprint"] == out[0]["fingerprint"]  # same failure, other shape
        assert out[1] == {"error": "not_json"}
        assert out[3] == {"error": "empty_line"}
        assert out[4]["records"] == otel.records
        assert out[4]["exception_type"] == "KeyError"
        assert out[5] == {"error": "not_object"}

    def test_the_fingerprint_is_the_services(self, stream: SampleStream) -> None:
        """Each line's fingerprint is the one the service counts its burst under (`full_keys`: decoded,
        redacted, signed), also for a failure signed by a message redaction changes."""
        secret = orjson.dumps({"server_id": "checkout", "level": "error", "error.type": "AuthError",
                               "message": "login refused: password=hunter2xyz"})
        lines = [*(message.value for message in stream.messages[:200]), secret]
        proc = logagent("fingerprint", stdin=b"\n".join(lines) + b"\n")
        assert proc.returncode == 0, proc.stderr
        config, redactor = DecodeConfig(), Redactor()
        printed = [orjson.loads(line).get("fingerprint") for line in proc.stdout.splitlines()]
        expected = [_service_fingerprint(line, config, redactor) for line in lines]
        assert printed == expected
        assert sum(f is not None for f in printed) > 150
        assert orjson.loads(proc.stdout.splitlines()[-1])["basis"] == "message"

    def test_a_frame_whose_fields_join_into_a_secret_is_printed_redacted(self) -> None:
        """Module and function each pass redaction alone; printed as `module.function` they spell an email
        (attacker review)."""
        line = orjson.dumps({"server_id": "api", "message": "boom", "exception": {"type": "E", "value": "v",
                             "stacktrace": [{"module": "jane.doe@example", "function": "com", "lineno": 1},
                                            {"module": "app.orders", "function": "total", "lineno": 2}]}})
        proc = logagent("fingerprint", stdin=line + b"\n")
        assert proc.returncode == 0, proc.stderr
        assert orjson.loads(proc.stdout)["frames"] == ["app.orders.total", "[REDACTED:email]"]

    def test_reads_a_file_argument(self, stream: SampleStream, tmp_path: Path) -> None:
        """`logagent fingerprint FILE` reads the file; message-only noise gets a message basis."""
        noise = _first(stream, "noise:provider-503", "ecs")
        path = tmp_path / "events.jsonl"
        path.write_bytes(noise.value + b"\n")
        proc = logagent("fingerprint", str(path))
        assert proc.returncode == 0, proc.stderr
        (line,) = proc.stdout.splitlines()
        assert orjson.loads(line)["basis"] == "message"

    def test_missing_file_is_a_user_error(self, tmp_path: Path) -> None:
        """A file that does not exist ends with one line on stderr and exit code 2."""
        assert "cannot read" in _one_error_line(logagent("fingerprint", str(tmp_path / "absent.jsonl")))
        assert "the file name is empty: name a file, or - for stdin" in _one_error_line(logagent("fingerprint", ""))


class TestAnalyze:
    def _analyze(self, event: bytes, *args: str) -> Analysis:
        proc = logagent("analyze", *args, "--offline", stdin=event)
        assert proc.returncode == 0, proc.stderr
        (line,) = proc.stdout.splitlines()
        return Analysis.model_validate_json(line)

    def test_python_event_points_at_the_buggy_line(self, services: dict[str, SampleService],
                                                    stream: SampleStream) -> None:
        """The offline analysis of a real traceback names the file and line that raised, at its commit."""
        orders = services["orders-service"]
        message = _first(stream, "unknown-coupon", "native")
        commit = orjson.loads(message.value)["commit"]
        trace = orders.trace("unknown-coupon", commit)
        assert trace is not None
        analysis = self._analyze(message.value, "--repo", str(orders.repo))
        assert analysis.commit == commit
        assert analysis.culprit is not None
        assert (analysis.culprit.path, analysis.culprit.line) == ("orders/pricing.py", trace.culprit_line)

    def test_java_raw_trace_from_a_file(self, services: dict[str, SampleService], stream: SampleStream,
                                        tmp_path: Path) -> None:
        """An ECS event with a text trace, read from --event FILE, localises to the Java source file."""
        checkout = services["checkout-service"]
        message = _first(stream, "coupon-required", "ecs")
        path = tmp_path / "event.json"
        path.write_bytes(message.value)
        analysis = self._analyze(b"", "--repo", str(checkout.repo), "--event", str(path))
        assert analysis.culprit is not None
        assert analysis.culprit.path == checkout.bug("coupon-required").culprit_path

    def test_an_export_of_several_records_says_which_is_analysed(self, services: dict[str, SampleService],
                                                                 stream: SampleStream) -> None:
        """An OTLP export carries several records: the first is analysed, and stderr says so (before, the
        others went unmentioned)."""
        message = _first(stream, "unknown-coupon", "otel", min_records=2)
        proc = logagent("analyze", "--repo", str(services["orders-service"].repo), "--offline", stdin=message.value)
        assert proc.returncode == 0, proc.stderr
        said = f"the message holds {message.records} log records; analysing the first (logagent redact prints them all)"
        assert said in proc.stderr.decode()
        assert Analysis.model_validate_json(proc.stdout).cluster.count == 1

    def test_an_event_without_a_time_says_its_id_is_not_reproducible(
            self, services: dict[str, SampleService], stream: SampleStream, tmp_path: Path) -> None:
        """The analysis id is made from the burst's start: without a time in the event, the time now stands
        in, and stderr says so (a new user ran it twice and got two ids); with one, nothing is said. A usage
        error is still the one line on stderr (the note came first before)."""
        message = _first(stream, "unknown-coupon", "native")
        timeless = orjson.loads(message.value)
        del timeless["timestamp"]
        repo = str(services["orders-service"].repo)
        ids = set()
        for _ in range(2):
            proc = logagent("analyze", "--repo", repo, "--offline", stdin=orjson.dumps(timeless))
            assert proc.returncode == 0 and "no usable timestamp" in proc.stderr.decode(), proc.stderr
            ids.add(Analysis.model_validate_json(proc.stdout).analysis_id)
        assert len(ids) == 2
        proc = logagent("analyze", "--repo", repo, "--offline", stdin=message.value)
        assert proc.returncode == 0 and b"timestamp" not in proc.stderr
        proc = logagent("analyze", "--repo", str(tmp_path / "missing"), "--offline", stdin=orjson.dumps(timeless))
        assert proc.returncode == 2 and proc.stderr.decode().count("\n") == 1, proc.stderr

    def test_explicit_commit_wins(self, services: dict[str, SampleService], stream: SampleStream) -> None:
        """--commit analyses that revision, whatever the event says."""
        orders = services["orders-service"]
        message = _first(stream, "unknown-coupon", "native")
        older = orders.commits[0]
        analysis = self._analyze(message.value, "--repo", str(orders.repo), "--commit", older)
        assert analysis.commit == older
        # A revision as a person types it (a trial saw `HEAD~1` refused); an option never is one.
        assert len(orders.commits) >= 2
        before_head = self._analyze(message.value, "--repo", str(orders.repo), "--commit", "HEAD~1")
        assert before_head.commit == orders.commits[-2]
        line = _one_error_line(logagent("analyze", "--repo", str(orders.repo), "--commit=--all", "--offline",
                                        stdin=message.value))
        assert "'--all' not found" in line

    def test_bad_event_is_a_user_error(self, services: dict[str, SampleService], tmp_path: Path) -> None:
        """An event that does not decode ends with one line naming the file, the reason and what to give
        instead, exit code 2."""
        repo = str(services["orders-service"].repo)
        line = _one_error_line(logagent("analyze", "--repo", repo, "--offline", stdin=b"{not json"))
        assert line.startswith("logagent: stdin is not a valid event (not_json: ")
        assert line.endswith("give one JSON log record with a message or an exception, in a shape the README's "
                             "Input section lists, or a trace as printed")
        other = tmp_path / "other.json"
        other.write_bytes(b'{"a": 1}')
        line = _one_error_line(logagent("analyze", "--repo", repo, "--offline", "--event", str(other)))
        assert line.startswith(f"logagent: {other} is not a valid event (no_error: ")

    def test_several_events_are_named_as_such(self, services: dict[str, SampleService]) -> None:
        """JSON lines (what `fingerprint` reads) are not one event: the line says how many and how to pick one
        (it said `not_json`, of valid JSON)."""
        repo = str(services["orders-service"].repo)
        for stdin in (b'{"message": "a"}\n{"message": "b"}\n', b'{"message": "a"}\n\n{"message": "b"}\n'):
            line = _one_error_line(logagent("analyze", "--repo", repo, "--offline", stdin=stdin))
            assert line == ("logagent: stdin holds 2 JSON lines: analyze reads one event "
                            "(pick one line, e.g. with sed -n 1p)")

    def test_an_empty_event_is_named_empty(self, services: dict[str, SampleService], tmp_path: Path) -> None:
        """Nothing on stdin, an empty file, or an empty --event name: one line saying so, exit code 2."""
        repo = str(services["orders-service"].repo)
        empty = tmp_path / "empty.json"
        empty.write_bytes(b"\n")
        assert "the event is empty: stdin holds no JSON event" in _one_error_line(
            logagent("analyze", "--repo", repo, "--offline", stdin=b" \n"))
        assert f"the event is empty: {empty} holds no JSON event" in _one_error_line(
            logagent("analyze", "--repo", repo, "--offline", "--event", str(empty)))
        assert "the file name is empty" in _one_error_line(
            logagent("analyze", "--repo", repo, "--offline", "--event", ""))

    def test_missing_repository_is_a_user_error(self, stream: SampleStream, tmp_path: Path) -> None:
        """A --repo that is not a git repository ends with one line, exit code 2."""
        message = _first(stream, "unknown-coupon", "native")
        for repo in (tmp_path / "absent", tmp_path):
            line = _one_error_line(logagent("analyze", "--repo", str(repo), "--offline", stdin=message.value))
            assert str(repo) in line or "repository" in line

    def test_unknown_commit_is_a_user_error(self, services: dict[str, SampleService],
                                            stream: SampleStream) -> None:
        """A --commit the repository does not have ends with one line, exit code 2."""
        message = _first(stream, "unknown-coupon", "native")
        line = _one_error_line(logagent("analyze", "--repo", str(services["orders-service"].repo),
                                        "--commit", "0" * 40, "--offline", stdin=message.value))
        assert "not found" in line


def _event_file(tmp_path: Path, message: SampleMessage | bytes, **changes: object) -> Path:
    """The message (with `changes` to its top-level fields) in a file, for `--event`."""
    value = message if isinstance(message, bytes) else message.value
    path = tmp_path / "event.json"
    path.write_bytes(orjson.dumps({**orjson.loads(value), **changes}))
    return path


class TestAnalyzeReadable:
    def test_a_terminal_gets_the_readable_analysis_in_colour(self, services: dict[str, SampleService],
                                                             stream: SampleStream, tmp_path: Path) -> None:
        """On a terminal: status, server, the exception, the culprit as path:line function with its code,
        the root cause and the suspects, coloured."""
        checkout = services["checkout-service"]
        message = _first(stream, "customer-npe", "native")
        trace = checkout.trace("customer-npe", orjson.loads(message.value)["commit"])
        assert trace is not None
        out = run_on_terminal("analyze", "--repo", str(checkout.repo), "--offline", "--event",
                              str(_event_file(tmp_path, message)), env=clean_env())
        assert out.returncode == 0, out.stderr
        bug = checkout.bug("customer-npe")
        assert COLOUR.search(out.stdout)
        plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.stdout)
        assert "heuristic" in plain and "checkout-service" in plain and "1 event" in plain
        assert "java.lang.NullPointerException: Cannot invoke" in plain
        assert f"{bug.culprit_path}:{trace.culprit_line} {bug.culprit_function}" in plain
        assert re.search(rf"❱ {trace.culprit_line} │ .*getAddress\(\)", plain)
        assert "Root cause" in plain and "Suspects, most likely first" in plain
        assert not out.stdout.lstrip().startswith("{")

    def test_no_color_on_a_terminal_keeps_the_text_without_colour(self, services: dict[str, SampleService],
                                                                  stream: SampleStream, tmp_path: Path) -> None:
        """NO_COLOR is respected: the same readable text, no colour escapes."""
        checkout = services["checkout-service"]
        event = _event_file(tmp_path, _first(stream, "customer-npe", "native"))
        out = run_on_terminal("analyze", "--repo", str(checkout.repo), "--offline", "--event", str(event),
                              env=clean_env(NO_COLOR="1"))
        assert out.returncode == 0, out.stderr
        assert not COLOUR.search(out.stdout)
        assert "Culprit" in out.stdout and checkout.bug("customer-npe").culprit_path in out.stdout

    def test_text_into_a_pipe_and_json_on_a_terminal_on_request(
            self, services: dict[str, SampleService], stream: SampleStream, tmp_path: Path) -> None:
        """--text gives the readable form into a pipe, without any escape; --json on a terminal gives JSON
        (a pipe gets JSON by default: TestAnalyze)."""
        orders = services["orders-service"]
        event = str(_event_file(tmp_path, _first(stream, "unknown-coupon", "native")))
        args = ("analyze", "--repo", str(orders.repo), "--offline", "--event", event)
        text = run(*args, "--text", env=clean_env())
        assert text.returncode == 0 and "\x1b" not in text.stdout
        assert "Culprit  orders/pricing.py:" in text.stdout and "apply_coupon" in text.stdout
        on_terminal = run_on_terminal(*args, "--json", env=clean_env())
        assert Analysis.model_validate_json(on_terminal.stdout).status == "heuristic"


    def test_code_quoted_from_the_repository_is_redacted_in_both_modes(self, tmp_path: Path) -> None:
        """A secret in the lines around the culprit reaches neither the readable form nor the JSON."""
        repo = GitRepo(tmp_path / "shop")
        shop = f'AWS_KEY = "{SECRETS["aws"]}"\n' + SHOP_PY
        commit = repo.commit("shop", {"app/__init__.py": "", "app/shop.py": shop})
        event = orjson.dumps({
            "server_id": "shop", "timestamp": 1_750_000_000.0, "message": "KeyError: 'price'", "commit": commit,
            "exception": {"type": "KeyError", "value": "'price'", "stacktrace": [
                {"filename": "app/shop.py", "module": "app.shop", "function": "total",
                 "lineno": shop_line("BUG total") + 1, "in_app": True}]}})
        for mode in ("--text", "--json"):
            out = run("analyze", "--repo", str(repo.path), "--offline", mode, env=clean_env(), stdin=event)
            assert out.returncode == 0, out.stderr
            assert "app/shop.py" in out.stdout and SECRETS["aws"] not in out.stdout


    def test_a_working_tree_reads_only_what_git_tracks(self, tmp_path: Path) -> None:
        """A script that was never committed, run for real, fails in committed code; its traceback is saved
        as the event beside it. Neither the script nor the event file is a suspect (the event named `price`,
        so it matched the message's words), and a note says why and what to do."""
        repo = GitRepo(tmp_path / "trial")
        repo.commit("lib", {"lib.py": "def total(items):\n    return sum(item['price'] for item in items)\n"})
        repo.write({"try.py": "from lib import total\n\nprint(total([{'price': 3}, {'cost': 4}]))\n"})
        crash = _run_python(repo.path, "try.py")
        assert "KeyError: 'price'" in crash.stderr
        event = repo.path / "ev.json"
        event.write_bytes(orjson.dumps({"server_id": "trial", "timestamp": 1_750_000_000.0, "level": "ERROR",
                                        "message": "checkout failed", "stack_trace": crash.stderr}))
        out = run("analyze", "--repo", str(repo.path), "--offline", "--json", "--event", str(event), env=clean_env())
        assert out.returncode == 0, out.stderr
        analysis = Analysis.model_validate_json(out.stdout)
        assert analysis.culprit is not None and (analysis.culprit.path, analysis.culprit.line) == ("lib.py", 2)
        assert {suspect.path for suspect in analysis.suspects} == {"lib.py"}
        head = analysis.commit[:12]
        assert analysis.notes[:2] == [
            f"the trace's try.py is not in commit {head}, so not read: commit it to analyse it",
            f"files not in commit {head} are not read (ev.json)"]
        assert not [note for note in analysis.notes if note.startswith("citation dropped")]
        # A third trial: a module not yet committed was named after the logs and outputs beside it.
        repo.write({"a.err": "", "b.log": "", "c.out": "", "z_helpers.py": "", "d.txt": ""})
        out = run("analyze", "--repo", str(repo.path), "--offline", "--json", "--event", str(event), env=clean_env())
        assert Analysis.model_validate_json(out.stdout).notes[1] == (
            f"files not in commit {head} are not read (z_helpers.py, a.err, b.log and 3 more)")


    def test_a_trace_as_printed_is_read_without_wrapping(self, tmp_path: Path) -> None:
        """A new-user trial piped a program's stderr straight in (`python main.py 2>&1 | logagent analyze`) and
        was told to write JSON: a trace or log line as printed is read as the trace field of a record."""
        repo = GitRepo(tmp_path / "piped")
        repo.commit("lib", {"lib.py": "def total(items):\n    return sum(item['price'] for item in items)\n",
                            "main.py": "from lib import total\n\nprint(total([{'cost': 4}]))\n"})
        crash = _run_python(repo.path, "main.py")
        out = run("analyze", "--repo", str(repo.path), "--offline", "--json", env=clean_env(),
                  stdin=crash.stderr.encode())
        assert out.returncode == 0, out.stderr
        analysis = Analysis.model_validate_json(out.stdout)
        assert analysis.cluster.exception_type == "KeyError" and analysis.culprit is not None
        assert (analysis.culprit.path, analysis.culprit.line) == ("lib.py", 2)
        assert out.stderr.count("\n") == 1 and "read as plain text" in out.stderr  # one note, not two

    def test_a_file_given_as_the_repository_is_named_a_file(self, tmp_path: Path) -> None:
        """A second trial gave a script as `--repo` and read "no such repository directory"."""
        script = tmp_path / "run.py"
        script.write_text("print(1)\n")
        out = run("analyze", "--repo", str(script), "--offline", env=clean_env(), stdin=b"boom")
        assert out.returncode == 2 and out.stderr.strip() == f"logagent: {script} is a file, not a repository's folder"

    def test_plain_text_is_told_from_json_as_printed(self, tmp_path: Path) -> None:
        """An attacker review: a byte-order mark before `{` read the record as text, a log line opening with `[`
        was refused as JSON, and a long trace was refused for its size once written into JSON."""
        repo = GitRepo(tmp_path / "forms")
        repo.commit("app", {"app.py": "print(1)\n"})
        args = ("analyze", "--repo", str(repo.path), "--offline", "--json")
        record = b'\xef\xbb\xbf{"server_id": "shop", "timestamp": 1750000000.0, "message": "boom", "level": "ERROR"}'
        out = run(*args, env=clean_env(), stdin=record)
        assert out.returncode == 0 and "plain text" not in out.stderr, out.stderr
        assert Analysis.model_validate_json(out.stdout).cluster.server == "shop"
        out = run(*args, env=clean_env(), stdin=b"[2024-05-01 12:00:00] ERROR app: checkout failed\n")
        assert out.returncode == 0 and "read as plain text" in out.stderr, out.stderr
        trace = b"Traceback (most recent call last):\n" + b'  File "/app/app.py", line 1, in <module>\n' * 20_000
        out = run(*args, env=clean_env(), stdin=trace + b"KeyError: 'x'\n")  # 0.8 MB, over 1 MiB in JSON
        assert out.returncode == 0, out.stderr
        out = run(*args, env=clean_env(), stdin=b"x" * 2_000_000)
        assert out.returncode == 2 and "LOGAGENT_INPUT__MAX_MESSAGE_BYTES (1048576 bytes)" in out.stderr
        # A third trial: a line without a trace read ": hello world" and "no frame of the trace maps"; bytes
        # that are no text were analysed as a message (the service's DLQ refuses them: invalid_utf8).
        out = run(*args, env=clean_env(), stdin=b"hello world\n")
        analysis = Analysis.model_validate_json(out.stdout)
        assert analysis.root_cause == "hello world (the log carries no stack trace: no code to locate)."
        assert not [note for note in analysis.notes if "no frame of the trace" in note], analysis.notes
        out = run(*args, env=clean_env(), stdin=b"\x89PNG\r\n\x1a\n\xff\xfe\x00 not text")
        assert out.returncode == 2 and out.stderr.strip() == (
            "logagent: stdin is not UTF-8 text (invalid_utf8 at byte 0): give a trace as printed or one JSON log "
            "record"), out.stderr

    def test_a_culprit_hidden_from_git_or_reached_by_a_link_asks_for_review(self, tmp_path: Path) -> None:
        """An attacker review: a file marked `skip-worktree` (local secrets kept in a tracked config) and a
        culprit named through a committed symlink were read as committed, `needs_review` false."""
        repo = GitRepo(tmp_path / "hidden")
        code = "def total(items):\n    return sum(item['price'] for item in items)\n"
        (repo.path / "alias.py").parent.mkdir(parents=True, exist_ok=True)
        (repo.path / "alias.py").symlink_to("lib.py")
        repo.commit("lib", {"lib.py": code})
        git(repo.path, "update-index", "--skip-worktree", "lib.py")
        repo.write({"lib.py": "# local\n# edit\n" + code})
        for name in ("lib.py", "alias.py"):
            trace = (f'Traceback (most recent call last):\n  File "/app/{name}", line 4, in total\n'
                     "    return sum(item['price'] for item in items)\nKeyError: 'price'\n")
            out = run("analyze", "--repo", str(repo.path), "--offline", "--json", env=clean_env(),
                      stdin=trace.encode())
            analysis = Analysis.model_validate_json(out.stdout)
            assert analysis.culprit is not None and analysis.culprit.path == name, out.stdout
            assert analysis.needs_review and any("has uncommitted changes" in reason
                                                 for reason in analysis.review_reasons), (name, analysis.review_reasons)

    def test_a_culprit_in_a_file_changed_since_the_commit_asks_for_review(self, tmp_path: Path) -> None:
        """A new-user trial: two lines added to a committed file and not committed; the trace's line is the
        working tree's, while the analysis names HEAD. The culprit is marked unverified and the analysis asks
        for review, so `--json | jq .culprit` does not pass a line HEAD lacks for one it has."""
        repo = GitRepo(tmp_path / "edited")
        code = "def total(items):\n    return sum(item['price'] for item in items)\n"
        repo.commit("lib", {"lib.py": code, "main.py": "from lib import total\n\nprint(total([{'cost': 4}]))\n"})
        repo.write({"lib.py": "# totals\n# of carts\n" + code})
        crash = _run_python(repo.path, "main.py")
        assert 'lib.py", line 4' in crash.stderr
        event = orjson.dumps({"server_id": "shop", "timestamp": 1_750_000_000.0, "stack_trace": crash.stderr})
        out = run("analyze", "--repo", str(repo.path), "--offline", "--json", env=clean_env(), stdin=event)
        analysis = Analysis.model_validate_json(out.stdout)
        assert analysis.culprit is not None and (analysis.culprit.path, analysis.culprit.line) == ("lib.py", 4)
        assert analysis.needs_review and any("lib.py has uncommitted changes" in reason
                                             for reason in analysis.review_reasons), analysis.review_reasons
        # A second trial: its lines were cited at HEAD, where line 4 of lib.py is not the line meant.
        assert not [c for c in analysis.citations if c.path == "lib.py"], analysis.citations
        assert any(note.endswith("lib.py: changed since " + analysis.commit[:12] + ", so its lines cannot be cited "
                                 "there") for note in analysis.notes), analysis.notes

    def test_a_changed_file_is_said_once_however_many_of_its_lines_are_cited(self, tmp_path: Path) -> None:
        """A third trial read the same "citation dropped" note three times, one per suspect in the file."""
        repo = GitRepo(tmp_path / "edited")
        repo.commit("main", {"main.py": "def get_port(cfg):\n    return int(cfg['port'])\n\n\ndef main():\n"
                                        "    print(get_port({}))\n\n\nmain()\n"})
        repo.write({"main.py": "# edited\n" + (repo.path / "main.py").read_text()})
        crash = _run_python(repo.path, "main.py")
        out = run("analyze", "--repo", str(repo.path), "--offline", "--json", env=clean_env(),
                  stdin=crash.stderr.encode())
        analysis = Analysis.model_validate_json(out.stdout)
        assert len(analysis.suspects) >= 3, analysis.suspects
        dropped = [note for note in analysis.notes if note.startswith("citation dropped: main.py")]
        assert len(dropped) == 1, analysis.notes


class TestAnalyzeGuardRails:
    def test_another_commit_maps_the_trace_through_the_diff(self, services: dict[str, SampleService],
                                                            stream: SampleStream, tmp_path: Path) -> None:
        """An event logged at one commit, analysed at a later one where the failing line moved: the culprit is
        the moved line, and a note says the commits differ and the lines were mapped."""
        checkout = services["checkout-service"]
        old, new = checkout.commits[1], checkout.commits[2]
        before, after = checkout.trace("customer-npe", old), checkout.trace("customer-npe", new)
        assert before is not None and after is not None and before.culprit_line != after.culprit_line
        message = next(m for m in stream.messages if m.bug == "customer-npe" and m.shape == "native"
                       and orjson.loads(m.value)["commit"] == old)
        proc = logagent("analyze", "--repo", str(checkout.repo), "--offline", "--commit", new,
                        stdin=message.value)
        assert proc.returncode == 0, proc.stderr
        analysis = Analysis.model_validate_json(proc.stdout)
        assert analysis.commit == new
        assert analysis.culprit is not None and analysis.culprit.line == after.culprit_line
        assert any(f"not at the event's commit {old[:12]}" in note and "mapped through the diff" in note
                   for note in analysis.notes)
        assert not any("unverified" in reason for reason in analysis.review_reasons)
        assert f"not at the event's commit {old[:12]}" in proc.stderr.decode()  # said, whatever the output

    def test_an_unknown_event_commit_marks_the_culprit_line_unverified(
            self, services: dict[str, SampleService], stream: SampleStream) -> None:
        """The repository lacks the event's commit: the lines are read as they are, and the culprit line is
        marked unverified (review reason), with or without --commit."""
        orders = services["orders-service"]
        value = orjson.loads(_first(stream, "unknown-coupon", "native").value)
        event = orjson.dumps({**value, "commit": "f" * 40})
        for extra in ((), ("--commit", "HEAD")):
            proc = logagent("analyze", "--repo", str(orders.repo), "--offline", *extra, stdin=event)
            analysis = Analysis.model_validate_json(proc.stdout)
            assert analysis.needs_review
            assert any(r.startswith("culprit line unverified: the event was logged at commit " + "f" * 40)
                       for r in analysis.review_reasons), analysis.review_reasons

    def test_a_culprit_line_that_changed_is_unverified(self, tmp_path: Path) -> None:
        """The failing line itself was edited between the event's commit and --commit: it cannot be mapped,
        so the culprit is kept at the trace's line and marked unverified."""
        repo = GitRepo(tmp_path / "shop")
        old = repo.commit("shop", {"app/__init__.py": "", "app/shop.py": SHOP_PY})
        edited = SHOP_PY.replace('order["price"] * order["qty"]', 'order.get("price", 0) * order["qty"]')
        new = repo.commit("default the price", {"app/shop.py": edited})
        line = shop_line("BUG total")
        event = orjson.dumps({
            "server_id": "shop", "timestamp": 1_750_000_000.0, "message": "KeyError: 'price'", "commit": old,
            "exception": {"type": "KeyError", "value": "'price'", "stacktrace": [
                {"filename": "app/shop.py", "module": "app.shop", "function": "total", "lineno": line,
                 "in_app": True}]}})
        proc = logagent("analyze", "--repo", str(repo.path), "--offline", "--commit", new, stdin=event)
        analysis = Analysis.model_validate_json(proc.stdout)
        assert analysis.culprit is not None and analysis.culprit.line == line
        assert f"culprit line unverified: app/shop.py:{line} changed since the event's commit" in (
            analysis.review_reasons)


class TestOtherCommands:
    def test_invalid_settings_are_one_line(self) -> None:
        """A malformed LOGAGENT_* variable names the setting in one line, no traceback."""
        proc = logagent("fingerprint", stdin=b"", env={"LOGAGENT_WINDOW__QUIET_S": "soon"})
        assert "LOGAGENT_WINDOW__QUIET_S=soon is invalid" in _one_error_line(proc)

    def test_values_out_of_range_are_refused(self) -> None:
        """A TTL that is not positive, a min_score nothing can reach, a negative temperature: one line each."""
        for name, value, said in (("LOGAGENT_MEMORY__TTL_S", '{"default": -5}', "greater than 0"),
                                  ("LOGAGENT_MEMORY__RANKING__MIN_SCORE", "5", "nothing would ever be recalled"),
                                  ("LOGAGENT_AGENT__TEMPERATURE", "-3", "greater than or equal to 0")):
            assert said in _one_error_line(logagent("fingerprint", stdin=b"", env={name: value})), name

    def test_argument_errors_are_one_line(self) -> None:
        """A missing argument, an unknown flag or command: one line naming it and where help is, exit 2."""
        for argv, said in ((["memory", "show"], "logagent memory show: error: the following arguments are required"),
                           (["fingerprint", "--nope"],
                            "unrecognized arguments: --nope (see logagent fingerprint --help)"),
                           (["--nope"], "logagent: error: unrecognized arguments: --nope"),
                           (["memorise"], "invalid choice: 'memorise'")):
            assert said in _one_error_line(logagent(*argv)), argv

    def test_an_invalid_url_setting_stops_every_command(self) -> None:
        """`LOGAGENT_OLLAMA_URL=notaurl` is refused at settings load, by the service and the tools alike."""
        for command in (["run"], ["fingerprint"], ["memory", "servers"]):
            proc = logagent(*command, env={"LOGAGENT_OLLAMA_URL": "notaurl"})
            assert "LOGAGENT_OLLAMA_URL is invalid: not an http(s) URL" in _one_error_line(proc), command
