"""The service's log lines as a log pipeline receives them: ECS JSON, one line per change of state.

A real service on the tansu broker, logging at DEBUG into a buffer through the same formatter and
redaction `logagent run` installs.
"""

from __future__ import annotations

import asyncio
import http.server
import io
import logging
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from typing import Any

import httpx
import orjson
import pytest

from analysis.code.repo import RepoSync
from analysis.intake.redact import Redactor, redact_value
from consumer.explainer import HeuristicAnalyzer
from consumer.logs import REPEAT_WINDOW_S, _Repeats, log_fields, log_settings
from consumer.metrics import Metrics
from consumer.pipeline import Service
from consumer.runner import serve
from store import MemoryStore, NewCase, OnnxEmbedder
from tests.conftest import KafkaIO, SettingsFactory, ShopRepos, ecs_logs, run_until, shop_error

pytestmark = pytest.mark.integration

_T0 = 1_767_000_000.0
_ECS = {"@timestamp", "log.level", "log.logger", "message", "service.name", "ecs.version"}


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """The root logger writing ECS lines (redacted as in `logagent run`) into a buffer, restored after."""
    with ecs_logs("DEBUG", partial(redact_value, redactor=Redactor()), version="9.9.9") as buffer:
        yield buffer


def _parsed(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in buffer.getvalue().splitlines()]


class TestServiceLogs:
    def test_assignment_and_each_burst_opened_are_one_ecs_line_each(
        self, log_lines: io.StringIO, settings_factory: SettingsFactory, kafka_io: KafkaIO,
        shop_repos: Callable[..., ShopRepos]
    ) -> None:
        """Every line carries the ECS fields; the assignment is one `partitions-assigned` line, and each
        burst opened is one debug line saying when it closes (quiet period, latest close time)."""
        repos = shop_repos("shop")
        settings = settings_factory(partitions=1, window={"quiet_s": 0.5, "max_length_s": 60.0})
        service = Service(settings, HeuristicAnalyzer(RepoSync(repos.config)), Metrics())
        commit = repos.commits["shop"]
        stream = [shop_error("shop", "total", _T0 + i * 0.1, commit, i) for i in range(3)]
        stream += [shop_error("shop", "split", _T0 + i * 0.1, commit, i) for i in range(2)]

        async def scenario() -> None:
            await kafka_io.produce(settings.kafka.input_topic, stream)
            await run_until(service, lambda: service.stats.published == 2 and service.idle())

        started = datetime.now().astimezone()
        asyncio.run(scenario())
        lines = _parsed(log_lines)
        for line in lines:
            assert line.keys() >= _ECS and line["service.name"] == "logagent", line
            assert line["service.version"] == "9.9.9"
        [assigned] = [line for line in lines if line.get("event.action") == "partitions-assigned"]
        assert assigned["log.level"] == "info"
        repartition = settings.repartition.topic_for(settings.kafka.group_id)
        assert assigned["logagent"] == {
            "partitions": sorted([f"{settings.kafka.input_topic}/0", f"{repartition}/0"]), "owned": 2}
        opened = [line for line in lines if line.get("event.action") == "burst-opened"]
        assert len(opened) == 2 and {line["log.level"] for line in opened} == {"debug"}
        for line in opened:
            fields = line["logagent"]
            assert fields["server"] == "shop" and fields["closes_after_quiet_s"] == 0.5
            latest = datetime.fromisoformat(fields["closes_at_latest"])
            assert 55 <= (latest - started).total_seconds() <= 65
        analysed = [line for line in lines if line.get("event.action") == "burst-analysed"]
        assert len(analysed) == 2

    def test_input_fields_are_redacted_and_settings_fields_are_not(self, log_lines: io.StringIO) -> None:
        """A value that may come from input passes the redactor; the start-up line's settings keep the
        broker's address an operator needs to see."""
        log = logging.getLogger("consumer.test")
        log.warning("from input", extra=log_fields(error="login as jane.doe@example.com failed"))
        log.info("from settings", extra=log_settings("service-started", broker="10.1.2.3:9092"))
        by_message = {line["message"]: line for line in _parsed(log_lines)}
        assert "jane.doe@example.com" not in by_message["from input"]["logagent"]["error"]
        assert by_message["from settings"]["logagent"] == {"broker": "10.1.2.3:9092"}
        assert by_message["from settings"]["event.action"] == "service-started"

    def test_the_kafka_clients_repeats_are_thinned(self, log_lines: io.StringIO) -> None:
        """A trial counted ~150 lines a second of aiokafka's while the broker was down: each of its messages
        goes out once per window, the next saying how many were left out; the service's own lines never are."""
        # A logger of its own under `aiokafka`, at its own level: `feedback --via-kafka` quiets `aiokafka`.
        client, own = logging.getLogger("aiokafka.thinned_in_a_test"), logging.getLogger("consumer.test")
        client.setLevel(logging.INFO)
        for node in range(500):
            client.error("Unable connect to node with id %s: %s", node, "Connect call failed")
            own.warning("burst opened")
        client.warning("Unable to update metadata from %s", 1)
        lines = [line["message"] for line in _parsed(log_lines)]
        assert [m for m in lines if m.startswith("Unable")] == [
            "Unable connect to node with id 0: Connect call failed", "Unable to update metadata from 1"]
        assert lines.count("burst opened") == 500
        clock = [0.0]
        repeats = _Repeats(lambda: clock[0])
        records = [logging.LogRecord("aiokafka", logging.ERROR, "", 1, "down %s", (i,), None) for i in range(5)]
        assert [repeats.filter(r) for r in records[:3]] == [True, False, False]
        clock[0] = REPEAT_WINDOW_S
        assert repeats.filter(records[3]) and records[3].getMessage() == "down 3 (2 more like it in 10 s left out)"

    def test_a_line_that_cannot_be_redacted_is_written_without_its_input(self) -> None:
        """When redaction (or the message's own formatting) raises, logging's own report printed the record's
        message and arguments unredacted on stderr (attacker review): one line of the envelope goes instead."""

        def broken(value: object) -> object:
            raise RuntimeError("the redaction prefilter did not compile")

        with ecs_logs("INFO", broken) as buffer:
            log = logging.getLogger("consumer.test")
            log.warning("late user %s", "password=hunter2")
            log.warning("bad format %d", "password=hunter2")
        lines = _parsed(buffer)
        assert [line["message"] for line in lines] == ["a log line could not be written: RuntimeError",
                                                       "a log line could not be written: TypeError"]
        assert "hunter2" not in buffer.getvalue() and {*lines[0]} == _ECS

    def test_capturing_the_logs_leaves_no_logger_enabled_after(self) -> None:
        """Restored by assignment, the root level left every logger asked at DEBUG still logging at DEBUG:
        aiokafka's lines filled a later memory test of the same worker (new-user trial)."""
        probe = logging.getLogger("tests.logs.probe")  # a logger no code sets a level of its own on
        assert not probe.isEnabledFor(logging.DEBUG)
        with ecs_logs("DEBUG", lambda value: value):
            assert probe.isEnabledFor(logging.DEBUG)
        assert not probe.isEnabledFor(logging.DEBUG)


class TestHttpClientLines:
    def test_a_request_url_is_not_logged(self) -> None:
        """A webhook's URL is its secret (`logagent notify`, an operator trial): httpx's line per request
        named it whole, the token in its path unredacted."""
        with http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler) as server:
            threading.Thread(target=server.serve_forever, daemon=True).start()
            url = f"http://127.0.0.1:{server.server_address[1]}/hooks/T0A1B2C3/B9Z8Y7X6/q8Ws7Vu6Ts5Rq4Po3Nm2Lk1J"
            try:
                with ecs_logs("DEBUG", partial(redact_value, redactor=Redactor())) as buffer:
                    assert httpx.get(url, timeout=10).status_code == 404
            finally:
                server.shutdown()
        assert "q8Ws7Vu6" not in buffer.getvalue()


class TestStartupLines:
    def test_servers_the_memory_knows_without_a_repository_are_listed_at_start(
        self, log_lines: io.StringIO, settings_factory: SettingsFactory, embedder: OnnxEmbedder,
        shop_repos: Callable[..., ShopRepos]
    ) -> None:
        """The memory holds cases of "shop" (configured) and "ghost" (not): one warning names "ghost", after
        the start-up line that lists the servers with a repository."""
        repos = shop_repos("shop")
        base = settings_factory(partitions=1)
        settings = base.model_copy(update={
            "repo": repos.config, "http": base.http.model_copy(update={"host": "127.0.0.1", "port": 0})})
        memory = MemoryStore(settings.memory, embedder)
        for server in ("shop", "ghost"):
            memory.remember(NewCase(
                id=f"case-{server}", server=server, tenant="default", scope="default", fingerprint="f" * 16,
                exception_type="KeyError", error_text="KeyError: 'price'", analyzer="heuristic", commit=None,
                analysis_json=orjson.dumps({"analysis_id": f"case-{server}"}).decode(), created_at=_T0,
                status="heuristic"))

        async def scenario() -> None:
            stop = asyncio.Event()
            task = asyncio.create_task(serve(settings, stop))
            for _ in range(200):
                if '"servers-without-repository"' in log_lines.getvalue() or task.done():
                    break
                await asyncio.sleep(0.1)
            stop.set()
            await asyncio.wait_for(task, 60)

        asyncio.run(scenario())
        lines = _parsed(log_lines)
        [started] = [line for line in lines if line.get("event.action") == "service-started"]
        assert started["logagent"]["servers_with_repository"] == ["shop"]
        [warning] = [line for line in lines if line.get("event.action") == "servers-without-repository"]
        assert warning["log.level"] == "warning" and warning["logagent"] == {"servers": ["ghost"], "count": 1}
