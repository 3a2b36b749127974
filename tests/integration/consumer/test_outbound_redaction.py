"""Every byte that leaves the service is redacted, whatever field or repository file a secret came from.

One distinct secret is planted in every field of the input (server id, message, logger, tenant, commit,
exception type, value and frames, the raw trace, unknown fields) and in every repository file the
localiser can quote (the culprit's file, a caller's file, a commit message and author). The real service
runs on the tansu broker with real LanceDB memory, the real langchain-ollama client against the scripted
Ollama server (a model that echoes everything it saw into its answer), and the JSON log formatter. Then
every byte that left is scanned: Ollama request bodies, the output, review and DLQ topics (the DLQ's
value is the original message, the documented exception; its headers are scanned), the LanceDB files on
disk, the log lines and /metrics.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import generate_latest

from analysis.code.repo import RepoConfig, RepoSpec, RepoSync
from analysis.intake.redact import Redactor, redact_value
from consumer.explainer import build_explainer
from consumer.metrics import Metrics
from consumer.pipeline import Service
from consumer.settings import OllamaSettings, Settings
from tests.conftest import KafkaIO, SettingsFactory, ecs_logs, run_until
from tests.gitrepo import GitRepo
from tests.ollama_server import Reply, ScriptedOllama

pytestmark = pytest.mark.integration

T0 = 1_770_000_000.0
# field → a secret of a different kind, so a leak names the field it came from.
PLANTED = {
    "message": "ghp_M3ssag3T0k3nAAAAAAAAAAAAAAAAAAAAAAAA",
    "logger": "glpat-L0gg3rT0k3nBBBBBBBBB",
    "tenant": "AKIALOGGERTENANT0001",
    "exception type": "xoxb-1234567890-typeTypeTypeType",
    "exception value": "sk_live_51ValueValueValueValueValue",
    "frame function": "npm_" + "FrameFunction" * 2 + "Frame12345",
    "frame module": "SG." + "m" * 22 + "." + "M" * 43,
    "frame abs_path": "hf_AbsPathAbsPathAbsPathAbsPathAbsPath",
    "extra": "AIzaExtraExtraExtraExtraExtraExtraExtr1",
    "extra key": "dop_v1_" + "e" * 64,
    "extra nested": "frank.nested@example.org",
    "server id": "shpat_" + "5" * 32,
    "commit": "pul-" + "c" * 40,
    "raw trace": "PMAK-" + "a" * 24 + "-" + "b" * 34,
    "culprit file": "Sup3rS3cretDbPassw0rd",
    "caller file": "sk-proj-CallerCallerCallerCallerCaller0123",
    "commit message": "dapi" + "d" * 32,
    "commit author": "grace.author@example.net",
    "malformed message header": "NRAK-MALFORMEDHEADER0000000000",
}
SHOP_PY = f'''\
DB_PASSWORD = "{PLANTED["culprit file"]}"


def split(amount, parts):
    return amount / parts  # BUG split
'''
CALLER_PY = f'''\
from app.shop import split

API_KEY = "{PLANTED["caller file"]}"


def checkout(total):
    return split(total, 0)
'''


def _event(ts: float, commit: str, n: int) -> bytes:
    """A native ZeroDivisionError event with a secret in every field."""
    return orjson.dumps({
        "server_id": "shop", "timestamp": ts, "level": "error", "logger": f"app.shop {PLANTED['logger']}",
        "message": f"split failed ({PLANTED['message']}) attempt {n}", "commit": commit,
        "tenant": f"acme {PLANTED['tenant']}",
        "exception": {
            "type": f"ZeroDivisionError_{PLANTED['exception type']}",
            "value": f"division by zero {PLANTED['exception value']}",
            "stacktrace": [
                {"filename": "app/caller.py", "module": "app.caller", "function": "checkout", "lineno": 7,
                 "in_app": True},
                {"filename": "app/shop.py", "module": f"app.shop {PLANTED['frame module']}",
                 "abs_path": f"/srv/{PLANTED['frame abs_path']}/app/shop.py",
                 "function": f"split_{PLANTED['frame function']}", "lineno": 5, "in_app": True},
            ]},
        "request": {"headers": {"x-trace": PLANTED["extra"], PLANTED["extra key"]: "1"},
                    "user": {"contact": PLANTED["extra nested"]}},
    })


def _other_server_event(ts: float) -> bytes:
    """An ECS event of a server with no repository: it gets a trace-only analysis, published for review."""
    return orjson.dumps({
        "@timestamp": ts, "service": {"name": f"billing-{PLANTED['server id']}",
                                      "version": f"{PLANTED['commit']}"},
        "log": {"level": "error"}, "message": "charge failed",
        "error": {"type": "RuntimeError", "message": "charge failed",
                  "stack_trace": f"Traceback (most recent call last):\n  File \"/app/bill.py\", line 3, in charge\n"
                                 f"    raise RuntimeError('{PLANTED['raw trace']}')\nRuntimeError: charge failed"},
    })


@pytest.fixture
def planted_repo(tmp_path: Path) -> Iterator[tuple[RepoConfig, str]]:
    repo = GitRepo(tmp_path / "origin" / "shop")
    repo.commit("initial", {"README.md": "shop\n"})
    commit = repo.commit(f"split: divide the total ({PLANTED['commit message']})",
                         {"app/__init__.py": "", "app/shop.py": SHOP_PY, "app/caller.py": CALLER_PY},
                         author=f"Grace <{PLANTED['commit author']}>")
    yield RepoConfig(cache_dir=tmp_path / "cache", servers={"shop": RepoSpec(url=str(repo.path))}), commit


def _echo(body: dict[str, Any]) -> Reply:
    """A model that puts everything it was shown into its answer, with a culprit that is rejected."""
    seen = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    return Reply.json({"root_cause": seen[-8000:], "culprit": {"path": "/etc/passwd", "line": 1},
                       "confidence": 0.9, "fix": {"path": "app/shop.py", "before": seen[-300:], "after": "x",
                                                  "explanation": seen[:2000]},
                       "citations": [{"path": "app/shop.py", "start_line": 1, "end_line": 5}]})


def _with_ollama(settings: Settings, url: str | None) -> Settings:
    if url is None:
        return settings
    memory = settings.memory.model_copy(update={"embedder": "ollama", "ollama_url": url})
    return settings.model_copy(update={"ollama": OllamaSettings(url=url, attempts=1), "memory": memory,
                                       "agent": settings.agent.model_copy(update={"request_timeout_s": 10.0})})


def _leaks(text: str) -> list[str]:
    return sorted(field for field, secret in PLANTED.items() if secret in text)


def _disk(folder: Path) -> str:
    """Every file under `folder` as text (LanceDB data, manifests and indexes)."""
    return "\n".join(path.read_bytes().decode("utf-8", "replace") for path in folder.rglob("*") if path.is_file())


@pytest.mark.parametrize("llm", [True, False], ids=["llm", "heuristic"])
def test_no_planted_secret_leaves_by_any_way(
        llm: bool, settings_factory: SettingsFactory, kafka_io: KafkaIO,
        planted_repo: tuple[RepoConfig, str]) -> None:
    """With the LLM (the model echoes its whole context) and in heuristic mode (the localiser quotes the
    culprit's code into root_cause), no planted secret is in any byte that left the service."""
    repo_config, commit = planted_repo
    with ScriptedOllama([_echo, _echo, _echo, _echo]) as ollama:
        settings = _with_ollama(settings_factory(partitions=1, window={"quiet_s": 0.3}), ollama.url if llm else None)
        with ecs_logs("INFO", partial(redact_value, redactor=Redactor(settings.redaction))) as log_lines:
            metrics = Metrics()
            service = Service(settings, build_explainer(settings, metrics, RepoSync(repo_config)), metrics)
            stream = [_event(T0 + i * 0.05, commit, i) for i in range(3)] + [_other_server_event(T0 + 0.2)]
            malformed = f'{{"server_id": "shop", "message": "{PLANTED["malformed message header"]}" '.encode()

            async def scenario() -> None:
                await kafka_io.produce(settings.kafka.input_topic, [*stream, malformed])
                await run_until(service, lambda: service.stats.published == 2 and service.idle(), timeout_s=60)

            asyncio.run(scenario())
        requests = ollama.all_text()
    kafka = settings.kafka
    outputs = asyncio.run(kafka_io.read_all(kafka.output_topic))
    reviews = asyncio.run(kafka_io.read_all(kafka.review_topic))
    (dlq,) = asyncio.run(kafka_io.read_all(kafka.dlq_topic))
    datas = [orjson.loads(record.value)["data"] for record in outputs]
    assert sorted(d["status"] for d in datas) == (["analyzed", "heuristic"] if llm else ["heuristic", "heuristic"])
    shop = next(d for d in datas if d["cluster"]["server"] == "shop")
    billing = next(d for d in datas if d["cluster"]["server"] != "shop")
    assert billing["needs_review"] and "trace-only" in billing["review_reasons"][0]
    if not llm:
        assert "Code at" in shop["root_cause"] and "DB_PASSWORD = \"[REDACTED:secret]\"" in shop["root_cause"]
    else:
        assert "[REDACTED:" in requests and reviews, "the model saw redacted text; its answer went to review"
    assert PLANTED["malformed message header"].encode() in dlq.value, "the DLQ keeps the original bytes"
    found = {
        "ollama requests": _leaks(requests),
        "output topic": _leaks(b"\n".join(r.value for r in outputs).decode()),
        "review topic": _leaks(b"\n".join(r.value for r in reviews).decode()),
        "dlq headers": _leaks(repr(dlq.headers)),
        "memory files": _leaks(_disk(Path(settings.memory.uri))),
        "logs": _leaks(log_lines.getvalue()),
        "metrics": _leaks(generate_latest(metrics.registry).decode()),
    }
    assert found == {where: [] for where in found}, f"leaked: {found}"
