"""`logagent notify` as a user runs it: mistakes exit 2 with one line, the process serves its probes and
metrics, and SIGTERM stops it cleanly."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from consumer.cli import main
from demo.broker import EmbeddedBroker
from tests.conftest import FAST_GROUP_TIMINGS
from tests.notify_events import make_analysis
from tests.paths import PROJECT_ROOT
from tests.ports import free_port
from tests.slack_server import SlackWebhook

pytestmark = pytest.mark.integration


def _env(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGAGENT_")}
    env.update({f"LOGAGENT_{k}": v for k, v in settings.items()})
    return env


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """`logagent ARGS` in this process with `LOGAGENT_*` from `settings` only: (exit code, stdout, stderr)."""

    def run(*args: str, stdin: bytes = b"", **settings: str) -> tuple[int, str, str]:
        for key in list(os.environ):
            if key.startswith("LOGAGENT_"):
                monkeypatch.delenv(key)
        for key, value in settings.items():
            monkeypatch.setenv(f"LOGAGENT_{key}", value)
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


class TestMistakes:
    def test_no_sink_enabled(self, run_cli: Callable[..., tuple[int, str, str]]) -> None:
        """Without a sink there is nothing to do: one line on stderr, exit 2."""
        code, _, err = run_cli("notify")
        assert code == 2
        assert err.strip().splitlines() == [
            "logagent: no sink is enabled: set LOGAGENT_NOTIFY__SLACK__ENABLED=true (or WEBHOOK, GITHUB, GITLAB) "
            "with its secret"]

    def test_enabled_sink_without_its_secret(self, run_cli: Callable[..., tuple[int, str, str]]) -> None:
        """An enabled sink needs its secret from the environment or a file."""
        code, _, err = run_cli("notify", NOTIFY__GITHUB__ENABLED="true")
        assert code == 2 and "LOGAGENT_NOTIFY__GITHUB__*" in err and "token" in err

    def test_unreadable_secret_file(self, run_cli: Callable[..., tuple[int, str, str]], tmp_path: Path) -> None:
        """A secret file that is not there is named in the one-line message, before Kafka is touched."""
        missing = tmp_path / "nope"
        code, _, err = run_cli("notify", NOTIFY__SLACK__ENABLED="true", NOTIFY__SLACK__WEBHOOK_URL_FILE=str(missing),
                               KAFKA__BOOTSTRAP_SERVERS="127.0.0.1:1")
        assert code == 2 and str(missing) in err and len(err.strip().splitlines()) == 1


    def test_an_unreachable_broker_is_one_line_not_a_silent_wait(self, tmp_path: Path) -> None:
        """With a sink enabled and no broker at the address, `logagent notify` exits 2 with one line naming
        the setting, as `logagent run` does (it used to retry for ever, its only output JSON log lines)."""
        with SlackWebhook() as slack:
            env = _env(KAFKA__BOOTSTRAP_SERVERS="127.0.0.1:1", HTTP__PORT=str(free_port()),
                       NOTIFY__SLACK__ENABLED="true", NOTIFY__SLACK__WEBHOOK_URL=slack.webhook_url)
            proc = subprocess.run([sys.executable, "-m", "consumer.cli", "notify"], env=env, cwd=PROJECT_ROOT,
                                  capture_output=True, timeout=60, check=False)
        lines = proc.stderr.decode().strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert lines[0].startswith("logagent: cannot connect to Kafka at LOGAGENT_KAFKA__BOOTSTRAP_SERVERS=127.0.0.1:1")


class TestPreview:
    def test_preview_of_analyze_output(self, run_cli: Callable[..., tuple[int, str, str]]) -> None:
        """A bare analysis on stdin (what `logagent analyze` prints) previews as text, or as Block Kit JSON."""
        analysis = make_analysis().model_dump_json().encode()
        code, out, _ = run_cli("notify", "--preview", stdin=analysis)
        assert code == 0 and out.startswith(":mag: NumberFormatException on checkout-service\n")
        code, out, _ = run_cli("notify", "--preview", "-", "--json", stdin=analysis)
        assert code == 0 and json.loads(out)["blocks"][0]["type"] == "header"

    def test_a_preview_is_redacted_as_a_delivery_is(self, run_cli: Callable[..., tuple[int, str, str]]) -> None:
        """What a user pastes from a preview holds no more than what a delivery sends (a new-user trial)."""
        analysis = make_analysis(root_cause="login failed: password=Hunter2-SuperSecret! for alice@example.com")
        for extra in ((), ("--json",)):
            code, out, _ = run_cli("notify", "--preview", "-", *extra, stdin=analysis.model_dump_json().encode())
            assert code == 0 and "Hunter2" not in out and "alice@example.com" not in out, out
            assert "[REDACTED:secret]" in out and "[REDACTED:email]" in out

    def test_preview_of_something_else(self, run_cli: Callable[..., tuple[int, str, str]]) -> None:
        """Input that is no analysis is a user mistake."""
        code, _, err = run_cli("notify", "--preview", stdin=b'{"hello": 1}')
        assert code == 2 and err.startswith("logagent: not an analysis event")



def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - a loopback URL we built
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


class TestProcess:
    def test_probes_metrics_and_sigterm(self, tansu: EmbeddedBroker, tmp_path: Path) -> None:
        """/livez answers, /readyz turns ready once the sink's consumer joined, /metrics carries only the
        notify metrics; SIGTERM exits 0."""
        port = free_port()
        with SlackWebhook() as slack:
            env = _env(KAFKA__BOOTSTRAP_SERVERS=tansu.bootstrap_servers, KAFKA__OUTPUT_TOPIC=f"analyses-{port}",
                       HTTP__HOST="127.0.0.1", HTTP__PORT=str(port), NOTIFY__SLACK__ENABLED="true",
                       NOTIFY__SLACK__WEBHOOK_URL=slack.webhook_url,
                       **{f"KAFKA__{k.upper()}": str(v) for k, v in FAST_GROUP_TIMINGS.items()})
            process = subprocess.Popen([sys.executable, "-m", "consumer.cli", "notify"], env=env, cwd=PROJECT_ROOT,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                deadline = time.monotonic() + 60
                ready = (0, b"")
                while time.monotonic() < deadline:
                    try:
                        ready = _get(f"http://127.0.0.1:{port}/readyz")
                    except OSError:
                        ready = (0, b"")
                    if ready[0] == 200:
                        break
                    time.sleep(0.2)
                assert ready[0] == 200, ready
                assert json.loads(ready[1])["checks"] == {"slack_consuming": True}
                assert _get(f"http://127.0.0.1:{port}/livez")[0] == 200
                metrics = _get(f"http://127.0.0.1:{port}/metrics")[1].decode()
                assert 'logagent_notify_deliveries_total{outcome="delivered",sink="slack"} 0.0' in metrics
                assert "logagent_ollama_up" not in metrics and "logagent_events_total" not in metrics
                process.send_signal(signal.SIGTERM)
                assert process.wait(timeout=30) == 0
            finally:
                if process.poll() is None:
                    process.kill()
