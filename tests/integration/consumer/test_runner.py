"""`logagent run` as an operator starts it: env settings, probes on its HTTP port, a clean SIGTERM.

A real subprocess of the CLI against the session's tansu broker, with local memory (ONNX embedder) and a
repository map file, as the Helm chart would configure it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from consumer.settings import Settings
from tests.conftest import SettingsFactory
from tests.paths import PROJECT_ROOT
from tests.ports import free_port

pytestmark = pytest.mark.integration



def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


class TestLogagentRun:
    def test_probes_turn_ready_and_sigterm_exits_zero(self, settings_factory: SettingsFactory,
                                                      tmp_path: Path) -> None:
        """/livez answers at once; /readyz says 503 with the failing checks until the partitions are assigned
        and the memory store is open (heuristic mode: no Ollama configured), then 200; /metrics serves the
        service's metrics; SIGTERM ends the process with exit code 0."""
        settings: Settings = settings_factory(partitions=1)
        repos_file = tmp_path / "repos.json"
        repos_file.write_text(json.dumps({}))
        port = free_port()
        kafka = settings.kafka
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOGAGENT_")}
        env.update({
            "LOGAGENT_DATA_DIR": str(tmp_path / "data"),
            "LOGAGENT_REPOS_FILE": str(repos_file),
            "LOGAGENT_HTTP__HOST": "127.0.0.1",
            "LOGAGENT_HTTP__PORT": str(port),
            "LOGAGENT_KAFKA__BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
            "LOGAGENT_KAFKA__INPUT_TOPIC": kafka.input_topic,
            "LOGAGENT_KAFKA__OUTPUT_TOPIC": kafka.output_topic,
            "LOGAGENT_KAFKA__DLQ_TOPIC": kafka.dlq_topic,
            "LOGAGENT_KAFKA__GROUP_ID": kafka.group_id,
            "LOGAGENT_KAFKA__SESSION_TIMEOUT_MS": "1000",
            "LOGAGENT_KAFKA__HEARTBEAT_INTERVAL_MS": "200",
            "LOGAGENT_KAFKA__REBALANCE_TIMEOUT_MS": "1000",
        })
        process = subprocess.Popen([sys.executable, "-m", "consumer.cli", "run"], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            seen: list[tuple[int, str]] = []
            while True:
                assert process.poll() is None, "logagent run exited early"
                assert time.monotonic() < deadline, f"never ready: {seen[-3:]}"
                try:
                    live = _get(port, "/livez")
                    ready = _get(port, "/readyz")
                except OSError:
                    time.sleep(0.1)
                    continue
                assert live[0] == 200
                seen.append(ready)
                if ready[0] == 200:
                    break
                assert ready[0] == 503 and ready[1], "not ready must say which checks fail"
                time.sleep(0.1)
            status, metrics = _get(port, "/metrics")
            assert status == 200 and "logagent_open_bursts" in metrics
            assert 'logagent_build_info{commit="' in metrics and "logagent_heuristic_mode 1.0" in metrics
            # The chart's `helm test` script, run as its pod would, against this replica and a dead one.
            script = PROJECT_ROOT / "deploy" / "helm" / "logagent" / "files" / "check_endpoints.py"
            checked = subprocess.run([sys.executable, str(script)], env={"TARGETS": f"http://127.0.0.1:{port}"},
                                     capture_output=True, text=True, timeout=30, check=False)
            assert checked.returncode == 0 and "ready, metrics served" in checked.stdout, checked.stdout
            dead = subprocess.run([sys.executable, str(script)],
                                  env={"TARGETS": f"http://127.0.0.1:{port} http://127.0.0.1:{free_port()}"},
                                  capture_output=True, text=True, timeout=30, check=False)
            assert dead.returncode == 1 and "unreachable" in dead.stdout, dead.stdout
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        output = process.stdout.read().decode() if process.stdout else ""
        lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
        assert any(line.get("message") == "stopped" for line in lines), output[-2000:]
        for line in lines:  # ECS: every line lands in the log pipelines users already run
            assert {"@timestamp", "log.level", "message", "service.name", "ecs.version"} <= line.keys(), line
            assert line["service.name"] == "logagent"
        [started] = [line for line in lines if line.get("event.action") == "service-started"]
        fields = started["logagent"]
        assert fields["broker"] == kafka.bootstrap_servers and fields["group"] == kafka.group_id
        assert fields["topics"]["input"] == kafka.input_topic
        assert fields["servers_with_repository"] == [] and fields["http_port"] == port
        assert fields["memory"] == str(tmp_path / "data" / "memory")
        assert fields["model"] is None and "heuristic" in fields["ollama"]
        [assigned] = [line for line in lines if line.get("event.action") == "partitions-assigned"]
        repartition = f"{kafka.group_id}-bursts-repartition"
        assert assigned["logagent"]["partitions"] == sorted([f"{kafka.input_topic}/0", f"{repartition}/0"])
