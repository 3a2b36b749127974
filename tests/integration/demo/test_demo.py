"""The demo end to end: embedded tansu, real sample repositories, the real service, the printed summary."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analysis.report import Analysis
from consumer.settings import Settings
from demo.broker import EmbeddedBroker
from demo.run import DemoResult, execute_demo, summarize
from demo.stream import ExpectedBurst
from tests.paths import PROJECT_ROOT

pytestmark = pytest.mark.integration

_ROOT = PROJECT_ROOT


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _accepts(bootstrap: str) -> bool:
    host, port = bootstrap.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


def _logagent_argv() -> list[str]:
    script = Path(sys.executable).parent / "logagent"
    return [str(script)] if script.exists() else [sys.executable, "-m", "consumer.cli"]


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LOGAGENT_")}


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> DemoResult:
    settings = Settings()
    settings = settings.model_copy(update={"ollama": settings.ollama.model_copy(update={"url": None})})
    workdir = tmp_path_factory.mktemp("demo")
    return asyncio.run(execute_demo(settings, workdir, events=1_500, seed=5, timeout_s=120))


def _analyses_of(result: DemoResult, burst: ExpectedBurst) -> list[Analysis]:
    """The analyses whose cluster is `burst`: same server, same first event (millisecond timestamps)."""
    return [a for a in result.analyses
            if a.cluster.server == burst.server_id and abs(a.cluster.first_seen - burst.first_seen) < 1e-3]


class TestDemoRun:
    def test_the_stream_is_drained(self, result: DemoResult) -> None:
        """Every produced message is read and every burst analysed before the timeout."""
        assert result.drained
        assert result.stats.events_in == len(result.stream.messages)

    def test_every_bug_burst_is_analysed_with_its_culprit(self, result: DemoResult) -> None:
        """Each burst of a real bug yields one analysis naming the faulting file and line at its commit."""
        for burst in result.stream.bursts:
            if burst.culprit_path is None:
                continue
            matches = _analyses_of(result, burst)
            assert len(matches) == 1, burst
            analysis = matches[0]
            assert analysis.cluster.count == burst.count  # all four shapes landed in one burst
            assert analysis.commit == burst.commit
            assert analysis.culprit is not None
            assert (analysis.culprit.path, analysis.culprit.line) == (burst.culprit_path, burst.culprit_line)

    def test_noise_bursts_are_grouped_by_masked_message(self, result: DemoResult) -> None:
        """Message-only errors with varying ids form one burst each, with no culprit to point at."""
        noise = [b for b in result.stream.bursts if b.culprit_path is None]
        assert noise
        for burst in noise:
            matches = _analyses_of(result, burst)
            assert [a.cluster.count for a in matches] == [burst.count]
            assert matches[0].culprit is None

    def test_one_analysis_per_burst(self, result: DemoResult) -> None:
        """No burst is analysed twice and none is split."""
        assert len(result.analyses) == len(result.stream.bursts)
        assert len({a.analysis_id for a in result.analyses}) == len(result.analyses)

    def test_dlq_holds_exactly_the_malformed_messages(self, result: DemoResult) -> None:
        """Each malformed message reaches the DLQ once, with the reason its defect calls for."""
        expected = sorted(m.reason for m in result.stream.messages if m.kind == "malformed")
        assert sorted(result.dlq_reasons) == expected
        assert len(expected) == result.stream.malformed_count > 0

    def test_broker_is_stopped_afterwards(self, result: DemoResult) -> None:
        """The tansu process the demo started is gone once the demo returns."""
        assert result.broker_pid is not None
        assert _gone(result.broker_pid)
        assert not _accepts(result.bootstrap_servers)

    def test_summary_names_every_culprit(self, result: DemoResult) -> None:
        """The printed summary shows counts, what each status shown means, the DLQ and each burst's culprit
        path:line."""
        text = summarize(result)
        assert f"DLQ        {result.stream.malformed_count}:" in text
        statuses = {analysis.status for analysis in result.analyses}
        assert "heuristic" in statuses
        for status in statuses:
            assert f"\n             {status}: " in text, status
        for burst in result.stream.bursts:
            if burst.culprit_path is not None:
                assert f"{burst.culprit_path}:{burst.culprit_line}" in text


class TestDemoCommand:
    def test_logagent_demo_reports_each_stage_and_keeps_what_it_built(self, tmp_path: Path) -> None:
        """`logagent demo --keep DIR` prints one line per stage in order, then the bursts, exits 0, and leaves
        the repositories, event files and memory that the next commands it prints can read."""
        keep = tmp_path / "run"
        proc = subprocess.run([*_logagent_argv(), "demo", "--events", "400", "--keep", str(keep)],
                              capture_output=True, text=True, cwd=_ROOT, env=_clean_env(), timeout=180, check=False)
        assert proc.returncode == 0, proc.stderr[-2000:]
        lines = proc.stdout.splitlines()
        stages = [next(i for i, line in enumerate(lines) if line.startswith(f"  {stage} "))
                  for stage in ("broker", "repos", "produced", "consumed", "analyses", "DLQ")]
        assert stages == sorted(stages) and lines[0] == "Log Agent demo"
        assert "tansu up on 127.0.0.1:" in lines[stages[0]] and "(stopped)" not in proc.stdout
        assert "culprit     orders/pricing.py:" in proc.stdout
        assert {p.name for p in (keep / "samples").iterdir()} == {"checkout-service", "orders-service",
                                                                  "payments-service"}
        assert (keep / "events.jsonl").stat().st_size > 0
        event = keep / "events" / "orders-service--unknown-coupon.json"
        assert event.is_file() and f"logagent analyze --repo {keep / 'samples'}" in proc.stdout
        analyze = subprocess.run([*_logagent_argv(), "analyze", "--repo", str(keep / "samples" / "orders-service"),
                                  "--event", str(event), "--offline"], capture_output=True, text=True, cwd=_ROOT,
                                 env=_clean_env(), timeout=60, check=False)
        culprit = Analysis.model_validate_json(analyze.stdout).culprit
        assert culprit is not None and culprit.path == "orders/pricing.py"
        # A message-only burst has its event too (the new-user trial found none to analyse).
        noise = sorted((keep / "events").glob("*--noise-*.json"))
        assert noise, sorted(p.name for p in (keep / "events").iterdir())
        repo = keep / "samples" / noise[0].name.split("--")[0]
        analyze = subprocess.run([*_logagent_argv(), "analyze", "--repo", str(repo), "--event", str(noise[0]),
                                  "--offline"], capture_output=True, text=True, cwd=_ROOT, env=_clean_env(),
                                 timeout=60, check=False)
        assert Analysis.model_validate_json(analyze.stdout).culprit is None
        servers = subprocess.run([*_logagent_argv(), "memory", "servers"], capture_output=True, text=True,
                                 cwd=_ROOT, env={**_clean_env(), "LOGAGENT_DATA_DIR": str(keep)}, timeout=60,
                                 check=False)
        assert {json.loads(line)["server"] for line in servers.stdout.splitlines()} == {
            "checkout-service", "orders-service", "payments-service"}

    def test_keep_refuses_a_directory_with_files(self, tmp_path: Path) -> None:
        """--keep on a non-empty directory is a user error (exit 2, one line): nothing there is overwritten."""
        (tmp_path / "precious.txt").write_text("mine")
        proc = subprocess.run([*_logagent_argv(), "demo", "--keep", str(tmp_path)], capture_output=True, text=True,
                              cwd=_ROOT, env=_clean_env(), timeout=60, check=False)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
        assert "empty directory" in proc.stderr and (tmp_path / "precious.txt").read_text() == "mine"

    def test_ctrl_c_stops_the_broker(self, tmp_path: Path) -> None:
        """SIGINT in the middle of the demo still terminates the broker it started; exit code 130; the line
        says where what was kept is, and that a second run needs that directory gone (or another)."""
        # As from a shell: SIGINT at its default, whatever this test process inherited or was left with
        # (a child started with SIGINT ignored keeps it ignored, and Ctrl-C would never reach it).
        kept = tmp_path / "kept"
        demo = subprocess.Popen([*_logagent_argv(), "demo", "--events", "3000", "--keep", str(kept)], cwd=_ROOT,
                                env=_clean_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                preexec_fn=_default_sigint)
        try:
            broker = _wait_for_child(demo.pid, "tansu", timeout_s=30)
            time.sleep(1.0)
            demo.send_signal(signal.SIGINT)
            _, stderr = demo.communicate(timeout=60)
        finally:
            if demo.poll() is None:
                demo.kill()
        assert demo.returncode == 130, stderr.decode()[-2000:]
        assert "demo interrupted (Ctrl-C): the service and the broker are stopped" in stderr.decode()
        assert f"built so far is in {kept} (remove it, or keep another directory, to run again)" in stderr.decode()
        deadline = time.monotonic() + 10
        while not _gone(broker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(broker)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for_child(parent: int, name: str, timeout_s: float) -> int:
    """The pid of `parent`'s child process called `name` (read from /proc), once it exists."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                # "pid (comm) state ppid ...": comm may hold spaces, so split around the parentheses.
                head, _, tail = stat.read_text().rpartition(")")
            except OSError:
                continue  # the process ended while we looked
            comm = head.partition("(")[2]
            if comm == name and int(tail.split()[1]) == parent:
                return int(stat.parent.name)
        time.sleep(0.1)
    raise AssertionError(f"no {name} child of {parent} within {timeout_s}s")


class TestEmbeddedBroker:
    def test_stops_when_the_body_raises(self) -> None:
        """An error inside `with EmbeddedBroker()` still terminates the broker process."""
        pid = None
        with pytest.raises(RuntimeError, match="boom"), EmbeddedBroker() as broker:
            pid = broker.pid
            assert _accepts(broker.bootstrap_servers)
            raise RuntimeError("boom")
        assert pid is not None
        assert _gone(pid)
