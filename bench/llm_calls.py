"""LLM calls per burst: one conversation per distinct (server, signature, commit), recurrences from memory.

The sample services' stream runs twice through the real Service on a tansu broker, with the real
Explainer: LanceDB memory under a temp dir (ONNX embedder), the LLM agent talking to the scripted
Ollama-protocol server through langchain-ollama. The scripted model answers every conversation at once
with the localiser's culprit (read from the prompt), so every analysis validates and is remembered.
The second pass repeats every burst at the same commit: each must be answered from memory.
The peer is the floor: the number of distinct bursts, i.e. calls a per-event design would multiply.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.code.repo import RepoConfig, RepoSpec, RepoSync
from bench.e2e import read_outputs, run_rounds
from consumer.explainer import build_explainer
from consumer.metrics import Metrics
from consumer.pipeline import Service
from consumer.settings import Settings
from demo.broker import EmbeddedBroker, create_topics
from demo.run import demo_settings
from demo.services import build_sample_repos
from demo.stream import build_stream
from tests.ollama_server import Reply, ScriptedOllama

_CULPRIT = re.compile(r"culprit: (\S+?):(\d+) in")
_ROUNDS = 2


def answer_from_prompt(body: dict[str, Any]) -> Reply:
    """A model that agrees with the localiser: its culprit, one citation, high confidence."""
    prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    found = _CULPRIT.search(prompt)
    if found is None:
        return Reply.json({"root_cause": "No in-app frame; the message alone describes the failure.",
                           "culprit": {"path": "", "line": None, "function": ""}, "confidence": 0.2})
    path, line = found.group(1), int(found.group(2))
    return Reply.json({
        "root_cause": f"The failure is raised at {path}:{line}.",
        "culprit": {"path": path, "line": line, "function": ""},
        "confidence": 0.8,
        "citations": [{"path": path, "start_line": line, "end_line": line}],
    }, prompt_tokens=900, completion_tokens=60)


@dataclass(frozen=True)
class LlmCallsResult:
    """What the pipeline published and what the model server received."""

    events: int
    bursts: int
    distinct: int
    conversations: int
    chat_requests: int
    statuses: Counter[str]

    def line(self) -> str:
        """One-line summary."""
        per_100k = self.conversations * 100_000 / self.events
        verdict = "OK" if self.conversations == self.distinct else "MISMATCH"
        status = ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items()))
        return (f"llm_calls: {self.conversations} LLM conversations for {self.distinct} distinct (server, "
                f"signature, commit) bursts = {self.conversations / self.distinct:.2f}x [{verdict}] "
                f"({self.bursts} bursts, {self.events} events = {per_100k:.0f} per 100k events, "
                f"{self.chat_requests} chat requests; published: {status})")


async def measure(events: int) -> LlmCallsResult:
    """Two passes of the sample stream through the Service with memory and the scripted model."""
    with (tempfile.TemporaryDirectory(prefix="bench-llm-") as tmp, EmbeddedBroker() as broker,
          ScriptedOllama([answer_from_prompt] * 10_000) as model):
        workdir = Path(tmp)
        base = Settings(data_dir=workdir, ollama={"url": model.url})
        settings = demo_settings(base, broker.bootstrap_servers, workdir)
        kafka = settings.kafka
        await create_topics(broker.bootstrap_servers, [kafka.input_topic, kafka.output_topic, kafka.dlq_topic,
                                                       kafka.review_topic], {kafka.input_topic: 3})
        services = build_sample_repos(workdir / "samples")
        stream = build_stream(services, events, seed=11, max_message_bytes=settings.input.max_message_bytes)
        messages = [(m.key, m.value) for m in stream.messages]
        specs = {server: RepoSpec(url=sample.repo.resolve().as_uri()) for server, sample in services.items()}
        metrics = Metrics()
        explainer = build_explainer(settings, metrics, RepoSync(RepoConfig(cache_dir=workdir / "cache",
                                                                           servers=specs)))
        service = Service(settings, explainer, metrics)
        await run_rounds(service, broker.bootstrap_servers, kafka.input_topic, messages, _ROUNDS)
        published = [data for _, data in await read_outputs(broker.bootstrap_servers, kafka.output_topic)]
        chats = model.chat_calls
    distinct = {(a["cluster"]["server"], a["cluster"]["fingerprint"], a["commit"]) for a in published}
    # A conversation opens with the system prompt and the burst; later requests carry the tool turns.
    conversations = sum(1 for body in chats if len(body.get("messages", [])) == 2)
    return LlmCallsResult(stream.event_count * _ROUNDS, len(published), len(distinct), conversations,
                          len(chats), Counter(a["status"] for a in published))


def bench(quick: bool) -> str:
    """Quick: 3k events per pass; full: 30k."""
    return asyncio.run(measure(3_000 if quick else 30_000)).line()
