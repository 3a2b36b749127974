"""The running service's /metrics move with what it does: index lag and stale citations after a code change.

Real tansu broker, real git repository with real commits, real LanceDB memory with the ONNX embedder, the
service's own HTTP endpoint scraped over loopback, and the scrape checked by `promtool check metrics`.
"""

from __future__ import annotations

import asyncio
import subprocess
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from analysis.code.repo import RepoConfig, RepoSpec, RepoSync
from consumer.explainer import build_explainer
from consumer.http import HealthState, serve_http
from consumer.metrics import Metrics
from consumer.pipeline import Service
from consumer.settings import Settings
from tests.conftest import SHOP_PY, KafkaIO, SettingsFactory, run_until, shop_error, tool
from tests.gitrepo import GitRepo
from tests.paths import PROJECT_ROOT

pytestmark = pytest.mark.integration

_ROOT = PROJECT_ROOT
_T0 = 1_750_000_000.0


def _scrape(port: int) -> tuple[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    return text, samples


def _value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


class TestMetricsOnARunningService:
    def test_stale_citations_and_index_lag_move_after_the_cited_code_changes(
        self, settings_factory: SettingsFactory, kafka_io: KafkaIO, tmp_path: Path
    ) -> None:
        """A burst at commit A is analysed and remembered (memory and repo index lag observed); the cited
        line then changes in commit B, and a burst of the same failure at B recalls the case as stale:
        the stale-citation counter and ratio rise on /metrics, and promtool accepts the scrape."""
        origin = GitRepo(tmp_path / "origin" / "shop")
        origin.commit("initial", {"README.md": "shop\n"})
        commit_a = origin.commit("shop service", {"app/__init__.py": "", "app/shop.py": SHOP_PY})
        changed = SHOP_PY.replace("return amount / parts  # BUG split",
                                  "return amount / max(parts, 1)  # BUG split guarded")
        assert changed != SHOP_PY, "the test must change the cited line"
        commit_b = origin.commit("guard split", {"app/shop.py": changed.replace("BUG split guarded", "BUG split")})
        repos = RepoConfig(cache_dir=tmp_path / "cache", servers={"shop": RepoSpec(url=str(origin.path))})

        settings: Settings = settings_factory(partitions=1)
        metrics = Metrics()
        explainer = build_explainer(settings, metrics, RepoSync(repos))
        health = HealthState()
        topic = settings.kafka.input_topic

        async def burst(commit: str, start: float) -> None:
            service = Service(settings, explainer, metrics, health)
            before = service.stats.published
            await kafka_io.produce(topic, [shop_error("shop", "split", start + i / 10, commit, i) for i in range(5)],
                                   keys=[b"shop"] * 5)
            await run_until(service, lambda: service.stats.published > before)

        with serve_http("127.0.0.1", 0, metrics, health) as endpoint:
            asyncio.run(burst(commit_a, _T0))
            _, first = _scrape(endpoint.port)
            assert _value(first, "logagent_index_lag_seconds_count", index="memory") == 1
            assert _value(first, "logagent_index_lag_seconds_count", index="repo") >= 1
            assert _value(first, "logagent_citations_total", kind="analysis") >= 1
            assert _value(first, "logagent_stale_citations_total", kind="memory") == 0

            asyncio.run(burst(commit_b, _T0 + 3600))
            text, second = _scrape(endpoint.port)

        assert _value(second, "logagent_memory_hits_total") >= 1
        assert _value(second, "logagent_citations_total", kind="memory") >= 1
        assert _value(second, "logagent_stale_citations_total", kind="memory") >= 1
        assert _value(second, "logagent_stale_citation_ratio") > 0
        assert _value(second, "logagent_index_lag_seconds_count", index="memory") == 2
        assert _value(second, "logagent_analyses_total", status="heuristic", analyzer="heuristic") == 2
        check = subprocess.run([tool("promtool"), "check", "metrics"], input=text, capture_output=True, text=True,
                               check=False)
        assert check.returncode == 0, check.stdout + check.stderr
