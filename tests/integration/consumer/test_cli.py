"""`logagent` as a user runs it: a real process, real sample repositories, real events."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from analysis.report import Analysis
from demo.services import SampleService, build_sample_repos
from demo.stream import SampleMessage, SampleStream, build_stream
from tests.paths import PROJECT_ROOT

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


def _one_error_line(proc: subprocess.CompletedProcess[bytes]) -> str:
    """The user error contract: exit code 2 and exactly one line on stderr, no traceback."""
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in lines[0]
    return lines[0]


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

    def test_explicit_commit_wins(self, services: dict[str, SampleService], stream: SampleStream) -> None:
        """--commit analyses that revision, whatever the event says."""
        orders = services["orders-service"]
        message = _first(stream, "unknown-coupon", "native")
        older = orders.commits[0]
        analysis = self._analyze(message.value, "--repo", str(orders.repo), "--commit", older)
        assert analysis.commit == older

    def test_bad_event_is_a_user_error(self, services: dict[str, SampleService]) -> None:
        """An event that does not decode ends with one line naming the reason, exit code 2."""
        repo = str(services["orders-service"].repo)
        line = _one_error_line(logagent("analyze", "--repo", repo, "--offline", stdin=b"{not json"))
        assert "not_json" in line

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


class TestOtherCommands:
    def test_invalid_settings_are_one_line(self) -> None:
        """A malformed LOGAGENT_* variable names the setting in one line, no traceback."""
        proc = logagent("fingerprint", stdin=b"", env={"LOGAGENT_WINDOW__QUIET_S": "soon"})
        assert "window.quiet_s" in _one_error_line(proc)
