"""`logagent demo`: its settings, and what it says when the timeout comes before the stream is drained."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

import demo.run
from consumer.settings import Settings
from consumer.workers import ServiceStats
from demo.run import DemoResult, demo_settings, run_demo
from demo.stream import SampleStream


async def _timed_out(settings: Settings, workdir: Path, **_: Any) -> DemoResult:
    """What `execute_demo` returns when `--timeout` passes first: 40 of 2,553 messages read."""
    stream = SampleStream(messages=tuple(object() for _ in range(2553)), bursts=())  # type: ignore[arg-type]
    return DemoResult(services={}, stream=stream, analyses=(), dlq_reasons=(),
                      stats=ServiceStats(events_in=40, published=2), drained=False, elapsed_s=5.0,
                      bootstrap_servers="127.0.0.1:1", broker_pid=None)


class TestTimeout:
    def test_a_timeout_exits_1_with_one_line_on_stderr(self, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
        """`logagent demo --timeout 0.001` exited 1 with nothing on stderr (attacker review): the line says
        what happened, how far it got and what to change."""
        monkeypatch.setattr(demo.run, "execute_demo", _timed_out)
        assert run_demo(Settings(), timeout_s=0.001, out=io.StringIO()) == 1
        assert capsys.readouterr().err == (
            "logagent: demo timed out after 0.001s, before the stream was drained (40 of 2553 messages read, 2 "
            "analyses published); give it longer with --timeout\n")


class TestDemoSettings:
    def test_the_group_joins_in_seconds_and_its_session_outlasts_a_busy_turn(self, tmp_path: Path) -> None:
        """Tansu holds a join for half the session timeout: the default 10 s kept the demo's one consumer
        waiting 5 s before it read anything. Its session stays longer than a second, so a loaded machine's
        slow turn does not drop it (and replay bursts)."""
        kafka = demo_settings(Settings(), "127.0.0.1:9092", tmp_path).kafka
        assert 1_000 < kafka.session_timeout_ms <= 3_000
        assert kafka.heartbeat_interval_ms * 3 <= kafka.session_timeout_ms
