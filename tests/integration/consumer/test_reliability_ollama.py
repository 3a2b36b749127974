"""Ollama faults through the whole service: every burst still yields an event, the breaker opens and closes.

The service runs in-process on the real tansu broker with the lead's explainer (real agent over the real
langchain-ollama client, real LanceDB memory, real git repos). Ollama is the scripted server behind a TCP
relay, so "down" is a real refused connection on the same address Ollama later comes back on.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import jsonschema
import orjson
import pytest

from analysis.code.repo import RepoSync
from consumer.cloudevent import event_schema
from consumer.explainer import build_explainer
from consumer.metrics import Metrics
from consumer.pipeline import Service
from consumer.settings import OllamaSettings
from tests.conftest import (
    SHOP_PY,
    KafkaIO,
    SettingsFactory,
    ShopRepos,
    TopicFactory,
    run_until,
    shop_error,
    shop_line,
)
from tests.ollama_server import Reply, ScriptedOllama
from tests.ports import free_port

pytestmark = pytest.mark.integration

T0 = 1_730_000_000.0


class Relay:
    """A loopback TCP relay to `target`: `down()` refuses connections and cuts open ones, `up()` serves again
    on the same port (what an Ollama pod restart looks like to the client)."""

    def __init__(self, target_port: int) -> None:
        self.port = free_port()
        self._target = ("127.0.0.1", target_port)
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """The Ollama base URL clients use."""
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> None:
        """Listen and relay."""
        listener = socket.create_server(("127.0.0.1", self.port))
        listener.settimeout(0.05)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        """Stop listening (connections are refused) and cut every relayed connection."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            upstream = socket.create_connection(self._target)
            with self._lock:
                self._sockets |= {client, upstream}
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def shop_answer(function: str, marker: str) -> dict[str, Any]:
    """A valid final answer about the shop service's bug in `function`."""
    line = shop_line(marker)
    return {
        "root_cause": f"{function} trusts its input; the raising line does not guard it.",
        "culprit": {"path": "app/shop.py", "line": line, "function": function},
        "suspects": [], "fix": None, "confidence": 0.7,
        "citations": [{"path": "app/shop.py", "start_line": line, "end_line": line}],
    }


class Phase:
    """One burst of the scenario: who fails, what Ollama does meanwhile, what must come out."""

    def __init__(self, name: str, server: str, function: str, replies: list[Reply], *, ollama_down: bool = False,
                 wait_before_s: float = 0.0) -> None:
        self.name, self.server, self.function = name, server, function
        self.replies, self.ollama_down, self.wait_before_s = replies, ollama_down, wait_before_s


class TestOllamaFaults:
    def test_every_burst_yields_an_event_through_faults_and_the_breaker_recovers(
            self, settings_factory: SettingsFactory, kafka_io: KafkaIO,
            shop_repos: Callable[..., ShopRepos]) -> None:
        """Wrong tool arguments, Ollama down, slow past the timeout, HTTP 500 and malformed NDJSON: each
        burst is published (analyzed, or heuristic with a note), failed requests are retried, the circuit
        opens after 3 failed bursts (no requests while open, `logagent_ollama_up` 0) and closes again on the
        first successful probe once Ollama is back."""
        repos = shop_repos("orders", "billing")
        answer = {f: shop_answer(f, marker) for f, marker in
                  (("total", "BUG total"), ("parse_qty", "BUG parse_qty"), ("split", "BUG split"))}
        phases = [
            Phase("bad tool arguments", "orders", "total", [
                Reply.tool_calls([("read_file", {"file": "app/shop.py"}), ("run_shell", {"cmd": "id"}),
                                  ("blame", {"path": "app/shop.py", "start_line": "two", "end_line": 3}),
                                  ("grep_files", {})]),
                Reply.json(answer["total"])]),
            Phase("down", "orders", "parse_qty", [], ollama_down=True),
            Phase("slow, then HTTP 500", "orders", "split", [Reply.delay(3.0, then=Reply.json(answer["split"])),
                                                            Reply.http_error(500)]),
            Phase("malformed NDJSON twice", "billing", "total", [Reply.malformed(), Reply.malformed()]),
            Phase("circuit open", "billing", "parse_qty", []),
            Phase("back", "billing", "split", [Reply.json(answer["split"])], wait_before_s=1.6),
        ]
        with ScriptedOllama() as ollama:
            relay = Relay(int(ollama.url.rsplit(":", 1)[1]))
            relay.up()
            settings = settings_factory(partitions=1, window={"quiet_s": 0.3}, pipeline={"max_inflight": 1})
            settings = settings.model_copy(update={
                "ollama": OllamaSettings(url=relay.url, attempts=2, failure_threshold=3, reset_after_s=1.5),
                "agent": settings.agent.model_copy(update={"request_timeout_s": 1.0})})
            metrics = Metrics()
            explainer = build_explainer(settings, metrics, RepoSync(repos.config))
            service = Service(settings, explainer, metrics)
            chats_per_phase: list[int] = []
            ollama_up: list[float | None] = []

            async def scenario() -> None:
                stop = asyncio.Event()
                task = asyncio.create_task(service.run(stop))
                try:
                    for index, phase in enumerate(phases):
                        await asyncio.sleep(phase.wait_before_s)
                        if phase.ollama_down:
                            relay.down()
                        ollama.add(*phase.replies)
                        before = len(ollama.chat_calls)
                        events = [shop_error(phase.server, phase.function, T0 + index * 100 + i * 0.05,
                                             repos.commits[phase.server], n=i) for i in range(3)]
                        await kafka_io.produce(settings.kafka.input_topic, events)
                        deadline = time.monotonic() + 20
                        while service.stats.published < index + 1:
                            assert not task.done(), "the service stopped"
                            assert time.monotonic() < deadline, f"phase {phase.name!r}: no event"
                            await asyncio.sleep(0.05)
                        chats_per_phase.append(len(ollama.chat_calls) - before)
                        ollama_up.append(metrics.registry.get_sample_value("logagent_ollama_up"))
                        if phase.ollama_down:
                            relay.up()
                finally:
                    stop.set()
                    await asyncio.wait_for(task, 30)

            asyncio.run(scenario())
            relay.down()
            unscripted = ollama.unscripted

        records = asyncio.run(kafka_io.read_all(settings.kafka.output_topic))
        data = [orjson.loads(r.value)["data"] for r in records]
        assert len(data) == len(phases), "one event per burst, none dropped"
        statuses = [d["status"] for d in data]
        assert statuses == ["analyzed", "heuristic", "heuristic", "heuristic", "heuristic", "analyzed"]
        notes = [" ".join(d["notes"]) for d in data]
        assert all("LLM unavailable" in n for n in notes[1:4]), notes
        # A refused connection surfaces as httpx.ConnectError (see the report: the note calls it a broken stream).
        assert "ConnectError" in notes[1] and "HTTP 500" in notes[2] and "stream broken" in notes[3], notes
        assert "LLM circuit open" in notes[4]
        assert all(d["culprit"]["path"] == "app/shop.py" for d in data), "heuristic events still localise"
        # Every failed burst made both attempts (the retry); slow and HTTP 500 are retried too.
        assert chats_per_phase == [2, 0, 2, 2, 0, 1], chats_per_phase
        assert unscripted == 0
        assert ollama_up == [1.0, 1.0, 1.0, 0.0, 0.0, 1.0], ollama_up
        sample = metrics.registry.get_sample_value
        assert sample("logagent_tool_calls_total", {"tool": "read_file", "outcome": "error"}) == 1
        assert sample("logagent_tool_calls_total", {"tool": "unknown", "outcome": "error"}) == 1
        assert sample("logagent_analyses_total", {"status": "heuristic", "analyzer": "heuristic"}) == 4


class TestHugeAnswer:
    def test_a_model_answer_of_megabytes_is_published_cut_to_fit_the_record_limit(
            self, settings_factory: SettingsFactory, topic_factory: TopicFactory, kafka_io: KafkaIO,
            shop_repos: Callable[..., ShopRepos]) -> None:
        """A model answers a 1.6 MB root cause and a 1.5 MB fix (a prompt injection, a runaway model): the
        event is cut to fit the output topic's record limit (1 MiB), published valid against the schema with a
        note and a copy on the review topic, and the offsets move on (attacker review: the publish failed
        after its retries, and the service crash-looped on the replay)."""
        repos = shop_repos("orders")
        line = shop_line("BUG total")
        answer = {**shop_answer("total", "BUG total"), "root_cause": "The price is never checked. " * 60_000,
                  "fix": {"path": "app/shop.py", "before": SHOP_PY.splitlines()[line - 1], "after": "#" * 1_500_000,
                          "explanation": "Check the key first."}}
        with ScriptedOllama([Reply.json(answer)]) as ollama:
            settings = settings_factory(partitions=1, window={"quiet_s": 0.3},
                                        kafka={"review_topic": topic_factory("review")})
            settings = settings.model_copy(update={
                "ollama": OllamaSettings(url=ollama.url),
                "memory": settings.memory.model_copy(update={"embedder": "ollama", "ollama_url": ollama.url})})
            metrics = Metrics()
            service = Service(settings, build_explainer(settings, metrics, RepoSync(repos.config)), metrics)
            stream = [shop_error("orders", "total", T0 + i * 0.05, repos.commits["orders"], n=i) for i in range(3)]

            async def scenario() -> None:
                await kafka_io.produce(settings.kafka.input_topic, stream)
                await run_until(service, lambda: service.stats.events_in == len(stream) and service.idle())

            asyncio.run(scenario())

        (record,) = asyncio.run(kafka_io.read_all(settings.kafka.output_topic))
        event = orjson.loads(record.value)
        jsonschema.Draft202012Validator(event_schema(), format_checker=jsonschema.FormatChecker()).validate(event)
        data = event["data"]
        assert len(record.value) < 1_048_576 and data["status"] == "analyzed"
        assert data["root_cause"].startswith("The price is never checked.") and len(data["root_cause"]) <= 4096
        assert data["fix"] == {"path": "app/shop.py", "before": "", "after": "", "explanation": "Check the key first."}
        assert data["culprit"] == answer["culprit"] and data["needs_review"]
        assert data["notes"][-1].startswith("event cut to fit the record limit of 1048576 bytes")
        assert [r.value for r in asyncio.run(kafka_io.read_all(settings.kafka.review_topic))] == [record.value]
        committed = asyncio.run(kafka_io.committed(settings.kafka.group_id, settings.kafka.input_topic))
        assert committed == {0: len(stream)}
