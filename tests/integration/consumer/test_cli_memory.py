"""`logagent memory|feedback|analyze` as operators run them: a real process on a real LanceDB memory."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from analysis.report import Analysis
from demo.broker import EmbeddedBroker
from store import CitedRange, MemoryConfig, MemoryStore, NewCase, OnnxEmbedder
from tests.conftest import SHOP_PY, KafkaIO, TopicFactory, shop_line
from tests.gitrepo import GitRepo
from tests.ollama_server import Reply, ScriptedOllama
from tests.paths import PROJECT_ROOT
from tests.ports import free_port
from tests.terminal import COLOUR, clean_env, run_on_terminal

pytestmark = pytest.mark.integration

_ROOT = PROJECT_ROOT
NOW = float(int(time.time()))  # now: TTLs and max ages count from the real clock


def logagent(*args: str, data_dir: Path, env: dict[str, str] | None = None,
             stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """Run the CLI with its data directory at `data_dir` and no other LOGAGENT_* setting."""
    script = Path(sys.executable).parent / "logagent"
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "consumer.cli"]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LOGAGENT_")}
    return subprocess.run([*argv, *args], input=stdin, capture_output=True, cwd=_ROOT, timeout=120, check=False,
                          env={**clean, "LOGAGENT_DATA_DIR": str(data_dir), **(env or {})})


def json_lines(proc: subprocess.CompletedProcess[bytes]) -> list[dict[str, Any]]:
    """Stdout of a successful run, one JSON object per line."""
    assert proc.returncode == 0, proc.stderr.decode()
    return [orjson.loads(line) for line in proc.stdout.splitlines()]


def one_error_line(proc: subprocess.CompletedProcess[bytes], code: int) -> str:
    """The error contract: exit `code`, exactly one line on stderr, no traceback."""
    assert proc.returncode == code, proc.stderr.decode()
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0], proc.stderr.decode()
    return lines[0]


class _TinyEmbedder:
    """An 8-dimensional embedder, to build a table the real 384-d model must refuse."""

    name = "test:tiny"
    dim = 8

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0] + [0.0] * 7 for _ in texts]


def case(memory_id: str, *, tenant: str = "acme", error: str, age_s: float = 0.0, server: str = "orders",
         root_cause: str = "", culprit: dict[str, Any] | None = None, commit: str = "c1",
         cited: tuple[CitedRange, ...] = ()) -> NewCase:
    """An LLM-made case of `server`."""
    analysis: dict[str, Any] = {"root_cause": root_cause or f"root cause of {memory_id}"}
    if culprit is not None:
        analysis["culprit"] = culprit
    return NewCase(id=memory_id, server=server, tenant=tenant, scope="default", fingerprint=f"fp-{memory_id}",
                   exception_type=error.split(":", 1)[0], error_text=error, analysis_json=json.dumps(analysis),
                   analyzer="llm", commit=commit, created_at=NOW - age_s, cited_files=cited)


ANALYSIS_ID = "1c2f0a9e-5b7d-4e21-9a3f-6d8e0b1c2a47"


@pytest.fixture
def data_dir(tmp_path: Path, embedder: OnnxEmbedder) -> Path:
    """A data directory whose memory holds three cases of `orders` (two tenants) and one of `billing`."""
    memory = MemoryStore(MemoryConfig(uri=str(tmp_path / "data" / "memory")), embedder)
    memory.remember(case("npe-old", error="NullPointerException: customer is null at OrderService.place",
                         age_s=7200))
    memory.remember(case("key-price", error="KeyError: 'price' at app.shop.total", age_s=3600))
    memory.remember(case("npe-globex", tenant="globex", error="NullPointerException: customer is null"))
    memory.remember(case("bill-1", server="billing", error="ZeroDivisionError: division by zero"))
    return tmp_path / "data"


class TestMemoryList:
    def test_lists_a_servers_cases_newest_first(self, data_dir: Path) -> None:
        """One JSON line per case of the server, newest first, with trust and tenant; exit 0."""
        rows = json_lines(logagent("memory", "list", "--server", "orders", data_dir=data_dir))
        assert [r["memory_id"] for r in rows] == ["npe-globex", "key-price", "npe-old"]
        assert {r["server"] for r in rows} == {"orders"}
        assert rows[0]["tenant"] == "globex" and rows[0]["trust"] == pytest.approx(0.7)

    def test_tenant_and_limit_narrow_the_list(self, data_dir: Path) -> None:
        """`--tenant` keeps one tenant's cases, `--limit` (or `-k`, as search takes it) the newest N."""
        for limit in ("--limit", "-k"):
            rows = json_lines(logagent("memory", "list", "--server", "orders", "--tenant", "acme", limit, "1",
                                       data_dir=data_dir))
            assert [r["memory_id"] for r in rows] == ["key-price"]

    def test_an_unknown_server_lists_nothing_and_says_where_it_looked(self, data_dir: Path) -> None:
        """A server or tenant without memory prints no line, exits 0, and says on stderr which server,
        tenant and store it looked in."""
        proc = logagent("memory", "search", "anything", "--server", "orders", "--tenant", "initech",
                        data_dir=data_dir)
        assert json_lines(proc) == []
        said = proc.stderr.decode()
        assert "no cases" in said and "'orders'" in said and "'initech'" in said and str(data_dir / "memory") in said

    def test_a_missing_memory_directory_is_named(self, tmp_path: Path) -> None:
        """No memory directory at all: nothing on stdout, exit 0, and stderr names the directory."""
        for action in (("list",), ("servers",)):
            proc = logagent("memory", *action, data_dir=tmp_path / "nowhere")
            assert json_lines(proc) == []
            assert f"no memory at {tmp_path / 'nowhere' / 'memory'}" in proc.stderr.decode()
        assert not (tmp_path / "nowhere").exists()

    def test_an_id_in_a_missing_memory_is_one_line_exit_1(self, tmp_path: Path) -> None:
        """`show`, `forget` and `feedback` of an id where no memory exists: the one line says there is no
        memory there (forget and feedback added a second, "no analysis"), exit 1 as for any unknown id."""
        for action in (("memory", "show", "x"), ("memory", "forget", "x"), ("feedback", "x", "--verdict", "wrong")):
            line = one_error_line(logagent(*action, data_dir=tmp_path / "nowhere"), 1)
            assert line.startswith(f"logagent: no memory at {tmp_path / 'nowhere' / 'memory'}"), action
        assert not (tmp_path / "nowhere").exists()

    def test_every_server_without_server_and_the_culprit_and_root_cause(self, data_dir: Path,
                                                                         embedder: OnnxEmbedder) -> None:
        """Without --server every server's cases are listed; each row has the root cause's first line and
        the culprit as `path:line function`; the readable form shows both."""
        memory = MemoryStore(MemoryConfig(uri=str(data_dir / "memory")), embedder)
        memory.remember(case("with-culprit", error="KeyError: 'qty'", root_cause="No qty.\nMore detail.",
                             culprit={"path": "app/shop.py", "line": 2, "function": "total"}))
        rows = json_lines(logagent("memory", "list", data_dir=data_dir))
        assert {r["server"] for r in rows} == {"orders", "billing"} and len(rows) == 5
        row = next(r for r in rows if r["memory_id"] == "with-culprit")
        assert (row["root_cause"], row["culprit"], row["verdict"]) == ("No qty.", "app/shop.py:2 total", None)
        text = logagent("memory", "list", "--text", data_dir=data_dir).stdout.decode()
        assert "culprit     app/shop.py:2 total" in text and "root cause  No qty." in text
        assert "More detail" not in text


class TestMemoryServers:
    def test_servers_and_tenants_with_counts_newest_and_expired(self, data_dir: Path,
                                                                embedder: OnnxEmbedder) -> None:
        """One row per server and tenant: case count, newest case, cases past their TTL."""
        memory = MemoryStore(MemoryConfig(uri=str(data_dir / "memory")), embedder)
        memory.remember(case("ancient", error="KeyError: 'x'", age_s=40 * 86_400))  # the TTL is 30 days
        rows = json_lines(logagent("memory", "servers", data_dir=data_dir))
        counts = {(r["server"], r["tenant"]): (r["cases"], r["expired"]) for r in rows}
        assert counts == {("billing", "acme"): (1, 0), ("orders", "acme"): (3, 1), ("orders", "globex"): (1, 0)}
        orders = next(r for r in rows if (r["server"], r["tenant"]) == ("orders", "acme"))
        assert orders["newest_at"] == pytest.approx(NOW - 3600)

    def test_a_terminal_gets_a_table(self, data_dir: Path) -> None:
        """On a terminal the servers are a table with named columns."""
        out = run_on_terminal("memory", "servers", env=clean_env(LOGAGENT_DATA_DIR=str(data_dir)))
        assert out.returncode == 0, out.stderr
        plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.stdout)
        assert re.search(r"server\s+tenant\s+cases\s+newest case\s+expired", plain)
        newest = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(NOW))
        assert re.search(rf"orders\s+globex\s+1\s+{newest} UTC\s+0", plain)


class TestMemoryShow:
    def test_the_whole_case_with_verdicts_notes_and_trust_history(self, data_dir: Path,
                                                                  embedder: OnnxEmbedder) -> None:
        """`show` after two verdicts: the analysis, both verdicts with their notes, trust 0.70 → 0.35 →
        1.00, and its freshness."""
        memory = MemoryStore(MemoryConfig(uri=str(data_dir / "memory")), embedder)
        assert memory.feedback(None, "npe-old", "wrong", "it was the cache")
        assert memory.feedback("orders", "npe-old", "correct", "on second look, right")
        (detail,) = json_lines(logagent("memory", "show", "npe-old", data_dir=data_dir))
        assert detail["summary"]["memory_id"] == "npe-old" and detail["analysis"]["root_cause"] == (
            "root cause of npe-old")
        assert [(v["verdict"], v["note"]) for v in detail["verdicts"]] == [
            ("wrong", "it was the cache"), ("correct", "on second look, right")]
        assert [round(p["trust"], 2) for p in detail["trust_history"]] == [0.7, 0.35, 1.0]
        assert detail["stale"] is False and detail["checked_against"] is None
        assert detail["error_text"].startswith("NullPointerException")
        # The list, the search and the summary say the latest verdict, which the trust follows: a trial saw
        # "trust 1.00, no verdict" (the net of one wrong and one correct is 0).
        assert detail["summary"]["verdict"] == "correct"
        listed = {r["memory_id"]: r["verdict"] for r in json_lines(logagent("memory", "list", data_dir=data_dir))}
        assert (listed["npe-old"], listed["key-price"]) == ("correct", None)
        found = json_lines(logagent("memory", "search", "--server", "orders", "NullPointerException in the cache",
                                    data_dir=data_dir))
        assert {r["memory_id"]: r["verdict"] for r in found}["npe-old"] == "correct"
        text = logagent("memory", "list", "--text", data_dir=data_dir).stdout.decode()
        assert "trust       1.00, marked correct" in text
        assert memory.feedback("orders", "npe-old", "wrong", "no, the cache after all")
        listed = {r["memory_id"]: r["verdict"] for r in json_lines(logagent("memory", "list", data_dir=data_dir))}
        assert listed["npe-old"] == "wrong"

    def test_a_terminal_shows_it_readably(self, data_dir: Path, embedder: OnnxEmbedder) -> None:
        """On a terminal: the verdict with its note, the trust history, freshness and the stored analysis,
        in colour."""
        memory = MemoryStore(MemoryConfig(uri=str(data_dir / "memory")), embedder)
        assert memory.feedback(None, "key-price", "wrong", "price is optional")
        out = run_on_terminal("memory", "show", "key-price", env=clean_env(LOGAGENT_DATA_DIR=str(data_dir)))
        assert out.returncode == 0, out.stderr
        assert COLOUR.search(out.stdout)
        plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.stdout)
        assert "marked wrong" in plain and '"price is optional"' in plain
        assert re.search(r"0\.70\s+stored \(llm analysis\)", plain) and re.search(r"0\.35\s+verdict wrong", plain)
        assert "fresh:" in plain and "root cause of key-price" in plain
        assert "it cites no code lines, so only its age can make it stale" in plain  # it was "unchanged"

    def test_staleness_against_a_repository(self, data_dir: Path, embedder: OnnxEmbedder, tmp_path: Path) -> None:
        """With --repo, a case whose cited line changed since its commit is stale, and says which lines."""
        repo = GitRepo(tmp_path / "shop")
        old = repo.commit("shop", {"app/__init__.py": "", "app/shop.py": SHOP_PY})
        repo.commit("edit total", {"app/shop.py": SHOP_PY.replace('order["qty"]', 'order.get("qty", 1)')})
        line = shop_line("BUG total")
        memory = MemoryStore(MemoryConfig(uri=str(data_dir / "memory")), embedder)
        memory.remember(case("cited", error="KeyError: 'qty'", commit=old,
                             cited=(CitedRange("app/shop.py", line, line),)))
        (fresh,) = json_lines(logagent("memory", "show", "cited", "--repo", str(repo.path), "--commit", old,
                                       data_dir=data_dir))
        assert fresh["stale"] is False and fresh["checked_against"] == old
        assert fresh["cited_files"] == [{"path": "app/shop.py", "start_line": line, "end_line": line, "blob_sha": ""}]
        (stale,) = json_lines(logagent("memory", "show", "cited", "--repo", str(repo.path), data_dir=data_dir))
        assert stale["stale"] is True and stale["stale_reasons"] == [f"changed app/shop.py:{line}"]
        other = GitRepo(tmp_path / "billing")
        other.commit("billing", {"app/shop.py": SHOP_PY})
        wrong = one_error_line(logagent("memory", "show", "cited", "--repo", str(other.path), data_dir=data_dir), 2)
        assert f"does not have the case's commit {old[:12]}" in wrong

    def test_an_unknown_id_exits_1(self, data_dir: Path) -> None:
        """No such case: exit 1 and one line naming the id and the store."""
        line = one_error_line(logagent("memory", "show", "nope", data_dir=data_dir), 1)
        assert "'nope'" in line and str(data_dir / "memory") in line

    def test_a_store_error_is_one_line_and_exit_2(self, tmp_path: Path) -> None:
        """A memory built with another embedding model is refused in one line, exit code 2."""
        memory = MemoryStore(MemoryConfig(uri=str(tmp_path / "data" / "memory")), _TinyEmbedder())
        memory.remember(case("tiny", error="KeyError: 'x'"))
        line = one_error_line(logagent("memory", "list", "--server", "orders", data_dir=tmp_path / "data"), 2)
        assert "memory error" in line


class TestMemorySearch:
    def test_the_most_similar_case_comes_first(self, data_dir: Path) -> None:
        """Search ranks by similarity to the text and reports the score."""
        rows = json_lines(logagent("memory", "search", "--server", "orders", "--tenant", "acme", "-k", "2",
                                   "KeyError price missing in shop total", data_dir=data_dir))
        assert [r["memory_id"] for r in rows] == ["key-price", "npe-old"]
        assert rows[0]["score"] > rows[1]["score"]
        text = logagent("memory", "search", "KeyError price missing in shop total", "--limit", "1", "--text",
                        data_dir=data_dir).stdout.decode()
        assert text.startswith("key-price  orders / acme") and re.search(r"similarity\s+0\.\d\d", text)

    def test_an_empty_text_is_a_user_error(self, data_dir: Path) -> None:
        """An empty or blank query would rank every case alike (the whole memory): one line, exit 2."""
        for text in ("", "  \t"):
            proc = logagent("memory", "search", text, data_dir=data_dir)
            assert "needs an error text" in one_error_line(proc, 2) and proc.stdout == b""


class TestMemoryForget:
    def test_forget_deletes_and_a_second_forget_exits_1(self, data_dir: Path) -> None:
        """Forgetting prints what went; the case is gone; forgetting it again is an unknown id (exit 1)."""
        assert json_lines(logagent("memory", "forget", "key-price", data_dir=data_dir)) == [
            {"analysis_id": "key-price", "forgotten": 1}]
        rows = json_lines(logagent("memory", "list", "--server", "orders", data_dir=data_dir))
        assert "key-price" not in [r["memory_id"] for r in rows] and len(rows) == 2
        assert "key-price" in one_error_line(logagent("memory", "forget", "key-price", data_dir=data_dir), 1)
        text = logagent("memory", "forget", "npe-old", "--text", data_dir=data_dir).stdout.decode()
        assert text.strip() == "forgot npe-old and its verdicts"


class TestShortIds:
    def test_the_first_characters_of_an_id_name_its_case(self, tmp_path: Path, embedder: OnnxEmbedder) -> None:
        """Slack shows a past case by its id's first 8 characters: `memory show`, `feedback` and `memory forget`
        take them (8 or more) when one case starts so; two cases starting so are one line, exit 2."""
        memory = MemoryStore(MemoryConfig(uri=str(tmp_path / "data" / "memory")), embedder)
        twin = ANALYSIS_ID[:9] + "0000-4000-8000-000000000000"
        for memory_id, tenant in ((ANALYSIS_ID, "acme"), (twin, "globex")):
            memory.remember(case(memory_id, tenant=tenant, error="KeyError: 'price' at app.shop.total"))
        data = tmp_path / "data"
        [shown] = json_lines(logagent("memory", "show", ANALYSIS_ID[:10], data_dir=data))
        assert shown["summary"]["memory_id"] == ANALYSIS_ID
        assert json_lines(logagent("feedback", ANALYSIS_ID[:10], "--verdict", "correct", data_dir=data)) == [
            {"analysis_id": ANALYSIS_ID, "verdict": "correct", "applied": True}]
        line = one_error_line(logagent("feedback", ANALYSIS_ID[:8], "--verdict", "correct", data_dir=data), 2)
        assert "starts more than one analysis id" in line and twin in line
        # With --tenant, only that tenant's cases are read: the start is the one case's, and the other
        # tenant's id is not shown.
        proc = logagent("feedback", ANALYSIS_ID[:8], "--verdict", "correct", "--tenant", "acme", data_dir=data)
        assert json_lines(proc) == [{"analysis_id": ANALYSIS_ID, "verdict": "correct", "applied": True}]
        line = one_error_line(logagent("feedback", twin[:8], "--verdict", "wrong", "--tenant", "initech",
                                       data_dir=data), 1)
        assert twin not in line and ANALYSIS_ID not in line and "of tenant 'initech'" in line
        assert json_lines(logagent("memory", "forget", twin[:12], data_dir=data)) == [
            {"analysis_id": twin, "forgotten": 1}]
        assert "abcdef12" in one_error_line(logagent("memory", "show", "abcdef12", data_dir=data), 1)


class TestFeedbackCommand:
    def test_correct_raises_trust_to_human(self, data_dir: Path) -> None:
        """`feedback ID --verdict correct` makes the case human-confirmed (trust 1.0, feedback +1)."""
        out = json_lines(logagent("feedback", "npe-old", "--verdict", "correct", "--note", "on-call agrees",
                                  data_dir=data_dir))
        assert out == [{"analysis_id": "npe-old", "verdict": "correct", "applied": True}]
        rows = json_lines(logagent("memory", "list", "--server", "orders", data_dir=data_dir))
        npe = next(r for r in rows if r["memory_id"] == "npe-old")
        assert npe["trust"] == 1.0 and npe["feedback"] == 1.0

    def test_wrong_forgets_when_configured(self, data_dir: Path) -> None:
        """With LOGAGENT_MEMORY__FORGET_ON_WRONG=true a wrong verdict deletes the case."""
        # The URI is spelled out: any LOGAGENT_MEMORY__* variable currently replaces the data_dir default.
        env = {"LOGAGENT_MEMORY__FORGET_ON_WRONG": "true", "LOGAGENT_MEMORY__URI": str(data_dir / "memory")}
        other = logagent("feedback", "npe-old", "--verdict", "wrong", "--tenant", "globex", data_dir=data_dir, env=env)
        assert "npe-old" in one_error_line(other, 1)  # another tenant's verdict neither judges nor forgets
        json_lines(logagent("feedback", "npe-old", "--verdict", "wrong", "--server", "orders", data_dir=data_dir,
                            env=env))
        rows = json_lines(logagent("memory", "list", "--server", "orders", data_dir=data_dir))
        assert "npe-old" not in [r["memory_id"] for r in rows]

    def test_the_readable_answer_says_what_changed(self, data_dir: Path) -> None:
        """`--text` (or a terminal) says the verdict was recorded and how the trust moved."""
        proc = logagent("feedback", "npe-old", "--verdict", "wrong", "--text", data_dir=data_dir)
        assert proc.returncode == 0
        assert "recorded 'wrong' on npe-old (orders / acme): trust 0.70 → 0.35" in proc.stdout.decode()

    def test_an_unknown_id_exits_1(self, data_dir: Path) -> None:
        """A verdict on an id the memory does not hold is one line and exit code 1."""
        line = one_error_line(logagent("feedback", "no-such-id", "--verdict", "wrong", data_dir=data_dir), 1)
        assert "no-such-id" in line and "its first 8 characters or more" in line

    def test_via_kafka_publishes_to_the_feedback_topic(
        self, tmp_path: Path, tansu: EmbeddedBroker, topic_factory: TopicFactory, kafka_io: KafkaIO
    ) -> None:
        """`--via-kafka` sends the verdict, keyed by analysis id, for the service to apply."""
        topic = topic_factory("feedback")
        env = {"LOGAGENT_KAFKA__BOOTSTRAP_SERVERS": tansu.bootstrap_servers,
               "LOGAGENT_KAFKA__FEEDBACK_TOPIC": topic}
        out = json_lines(logagent("feedback", ANALYSIS_ID, "--verdict", "wrong", "--note", "wrong file",
                                  "--via-kafka", data_dir=tmp_path, env=env))
        assert out == [{"analysis_id": ANALYSIS_ID, "verdict": "wrong", "published": topic}]
        (record,) = asyncio.run(kafka_io.read_all(topic))
        assert record.key == ANALYSIS_ID.encode()
        sent = orjson.loads(record.value)
        assert uuid.UUID(sent.pop("feedback_id"))  # so a redelivered copy counts once
        assert sent == {"analysis_id": ANALYSIS_ID, "verdict": "wrong", "note": "wrong file"}

    def test_via_kafka_refuses_what_is_no_analysis_id(self, tmp_path: Path) -> None:
        """The service can only log a verdict on an unknown id, so the CLI refuses what cannot be one (a
        new user sent `null` and was told it was published): one line, exit 2, nothing sent."""
        for given in ("null", ANALYSIS_ID[:8]):
            line = one_error_line(logagent("feedback", given, "--verdict", "wrong", "--via-kafka",
                                           data_dir=tmp_path), 2)
            assert "needs a whole analysis id" in line and repr(given) in line

    def test_via_kafka_to_no_broker_is_one_line(self, tmp_path: Path) -> None:
        """A broker that is not there: one line naming the setting to check, exit 2 (no client's log)."""
        address = f"127.0.0.1:{free_port()}"
        line = one_error_line(logagent("feedback", ANALYSIS_ID, "--verdict", "wrong", "--via-kafka", data_dir=tmp_path,
                                       env={"LOGAGENT_KAFKA__BOOTSTRAP_SERVERS": address}), 2)
        assert line.startswith(f"logagent: cannot connect to Kafka at LOGAGENT_KAFKA__BOOTSTRAP_SERVERS={address} ")


# -- analyze with the LLM -------------------------------------------------------------------------------


@pytest.fixture
def shop_repo(tmp_path: Path) -> tuple[Path, str]:
    """A real repository holding the shop service, and its commit."""
    repo = GitRepo(tmp_path / "shop")
    return repo.path, repo.commit("shop service", {"app/__init__.py": "", "app/shop.py": SHOP_PY})


def shop_event(commit: str) -> bytes:
    """A KeyError raised in `total`, with a secret in its message."""
    return orjson.dumps({
        "server_id": "shop", "timestamp": NOW, "level": "error", "message": "KeyError: 'price' for "
        "jane.doe@example.com", "commit": commit,
        "exception": {"type": "KeyError", "value": "'price'", "stacktrace": [
            {"filename": "app/shop.py", "module": "app.shop", "function": "total",
             "lineno": shop_line("BUG total"), "in_app": True}]},
    })


ANSWER = {"root_cause": "The order has no price key.", "confidence": 0.9,
          "culprit": {"path": "app/shop.py", "line": shop_line("BUG total"), "function": "total"},
          "citations": [{"path": "app/shop.py", "start_line": 1, "end_line": 2}]}


class TestAnalyzeWithLlm:
    def test_a_configured_ollama_is_asked(self, tmp_path: Path, shop_repo: tuple[Path, str]) -> None:
        """With LOGAGENT_OLLAMA_URL set, `analyze` runs the agent: status analyzed, the model's root cause,
        citations checked against the repository, and no personal data in the prompt or output."""
        repo, commit = shop_repo
        with ScriptedOllama([Reply.json(ANSWER)]) as ollama:
            proc = logagent("analyze", "--repo", str(repo), data_dir=tmp_path / "data",
                            env={"LOGAGENT_OLLAMA_URL": ollama.url}, stdin=shop_event(commit))
            (out,) = json_lines(proc)
            analysis = Analysis.model_validate(out)
            assert len(ollama.chat_calls) == 1
            assert "jane.doe@example.com" not in ollama.all_text()
        assert analysis.status == "analyzed" and analysis.analyzer == "llm"
        assert analysis.root_cause == ANSWER["root_cause"]
        assert [(c.path, c.start_line, c.commit) for c in analysis.citations] == [("app/shop.py", 1, commit)]
        assert "jane.doe@example.com" not in proc.stdout.decode()
        assert not (tmp_path / "data" / "memory").exists()

    def test_offline_never_asks(self, tmp_path: Path, shop_repo: tuple[Path, str]) -> None:
        """`--offline` stays heuristic even with an Ollama URL configured."""
        repo, commit = shop_repo
        with ScriptedOllama([Reply.json(ANSWER)]) as ollama:
            (out,) = json_lines(logagent("analyze", "--repo", str(repo), "--offline", data_dir=tmp_path,
                                         env={"LOGAGENT_OLLAMA_URL": ollama.url}, stdin=shop_event(commit)))
            assert ollama.chat_calls == []
        assert out["status"] == "heuristic" and out["culprit"]["path"] == "app/shop.py"

    def test_unreachable_ollama_falls_back_with_a_note(self, tmp_path: Path, shop_repo: tuple[Path, str]) -> None:
        """Nobody on the Ollama port: the heuristic analysis, exit 0, with a note saying why."""
        repo, commit = shop_repo
        url = f"http://127.0.0.1:{free_port()}"
        env = {"LOGAGENT_OLLAMA_URL": url, "LOGAGENT_OLLAMA__ATTEMPTS": "1"}
        (out,) = json_lines(logagent("analyze", "--repo", str(repo), data_dir=tmp_path, env=env,
                                     stdin=shop_event(commit)))
        assert out["status"] == "heuristic"
        assert any("LLM unavailable" in note for note in out["notes"])
