"""Every PromQL query of the dashboard and the alerts parses and reads only metrics the service exports."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import Counter, Gauge, Histogram

from consumer.metrics import Metrics
from tests.conftest import tool
from tests.paths import PROJECT_ROOT

pytestmark = pytest.mark.integration

_ROOT = PROJECT_ROOT
_CHART = _ROOT / "deploy" / "helm" / "logagent"
_DASHBOARD = _CHART / "dashboards" / "logagent.json"
_RULES = _CHART / "rules" / "logagent-rules.yaml"
_RULE_TESTS = _ROOT / "deploy" / "prometheus" / "rules-test.yaml"

# Labels Prometheus adds to every scraped series (ServiceMonitor or pod-annotation discovery), and the
# `cluster` label multi-cluster setups add as an external label or by relabeling.
_TARGET_LABELS = {"namespace", "pod", "job", "instance", "service", "container", "endpoint", "cluster"}
_RUNBOOK = _ROOT / "docs" / "runbook.md"
# Grafana's built-in and dashboard variables, replaced by values PromQL accepts.
_GRAFANA_VARIABLES = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "6h",
    "$cluster": ".*",
    "$namespace": ".*",
    "$job": ".*",
    "$pod": ".*",
}
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "inf", "nan"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_SELECTOR = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)?\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_NUMBER = re.compile(r"(?<![A-Za-z0-9_:])\d+(\.\d+)?([eE][-+]?\d+)?")


def selectors(expr: str) -> list[tuple[str, set[str]]]:
    """Each metric a PromQL expression selects, with the label names its matchers use."""
    found: list[tuple[str, set[str]]] = []

    def keep(match: re.Match[str]) -> str:
        # Matchers are parsed before strings are blanked: label values may hold anything.
        labels = {m.group(1) for m in _MATCHER.finditer(match.group(2))}
        found.append((match.group(1) or "", labels))
        return " "

    rest = _SELECTOR.sub(keep, expr)
    rest = _STRING.sub(" ", rest)
    rest = re.sub(r"\[[^\]]*\]", " ", rest)  # range and subquery windows
    rest = re.sub(r"\boffset\s+-?\w+", " ", rest)
    rest = _GROUPING.sub(" ", rest)
    rest = _NUMBER.sub(" ", rest)
    for match in _IDENTIFIER.finditer(rest):
        name = match.group(0)
        is_call = rest[match.end() :].lstrip().startswith("(")
        if not is_call and name.lower() not in _KEYWORDS:
            found.append((name, set()))
    return found


def _exported() -> dict[str, set[str]]:
    """Every series name the service can export, mapped to its label names (no `_created` series: the
    service turns them off), plus `up`, which Prometheus records for every target."""
    names: dict[str, set[str]] = {"up": set()}
    for metric in vars(Metrics()).values():
        if not isinstance(metric, Counter | Gauge | Histogram):
            continue
        base, labels = metric._name, set(metric._labelnames)
        if isinstance(metric, Counter):
            names[f"{base}_total"] = labels
        elif isinstance(metric, Histogram):
            names[f"{base}_bucket"] = labels | {"le"}
            for suffix in ("_sum", "_count"):
                names[f"{base}{suffix}"] = labels
        else:
            names[base] = labels
    return names


def _walk_panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _walk_panels(panel.get("panels", []))


def _dashboard_exprs() -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target, with Grafana variables replaced."""
    dashboard = json.loads(_DASHBOARD.read_text())
    exprs: list[tuple[str, str]] = []
    for panel in _walk_panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in _GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            exprs.append((panel["title"], expr))
    return exprs


def _variable_queries() -> list[str]:
    dashboard = json.loads(_DASHBOARD.read_text())
    return [v["query"]["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]


def _rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(_RULES.read_text())["groups"] for rule in group["rules"]]


def _assert_exported(where: str, expr: str, exported: dict[str, set[str]]) -> None:
    used = selectors(expr)
    assert used, f"{where}: no metric found in {expr!r}"
    for name, labels in used:
        assert name in exported, f"{where}: {name!r} is not a metric of consumer/metrics.py"
        unknown = labels - exported[name] - _TARGET_LABELS
        assert not unknown, f"{where}: {name} has no label {sorted(unknown)}"


class TestSelectorExtraction:
    def test_finds_metrics_and_matcher_labels_but_not_functions_or_groupings(self) -> None:
        """The extractor returns selected metrics, never function names, grouping labels or keywords."""
        expr = (
            'histogram_quantile(0.95, sum by (le, index) (rate(a_bucket{index="memory", le=~"1.*"}[5m])))'
            " / on (job) group_left (pod) b_total offset 5m > bool 1e3 and c unless d_count"
        )
        assert selectors(expr) == [
            ("a_bucket", {"index", "le"}),
            ("b_total", set()),
            ("c", set()),
            ("d_count", set()),
        ]

    def test_an_unknown_metric_is_reported(self) -> None:
        """A query naming a metric the service does not export fails the check."""
        with pytest.raises(AssertionError, match="logagent_made_up_total"):
            _assert_exported("probe", "rate(logagent_made_up_total[5m])", _exported())
        with pytest.raises(AssertionError, match="no label"):
            _assert_exported("probe", 'logagent_open_bursts{topic="x"}', _exported())


class TestDashboardQueries:
    def test_every_query_parses_with_promtool(self, tmp_path: Path) -> None:
        """Each dashboard query, wrapped as a recording rule, passes `promtool check rules`."""
        exprs = _dashboard_exprs()
        assert len(exprs) >= 20
        for title, expr in exprs:
            assert "$" not in expr, f"{title}: unknown Grafana variable in {expr!r}"
        rules = [{"record": f"logagent:dashboard:q{i}", "expr": expr} for i, (_, expr) in enumerate(exprs)]
        rule_file = tmp_path / "dashboard-rules.yaml"
        rule_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
        checked = subprocess.run(
            [tool("promtool"), "check", "rules", str(rule_file)], capture_output=True, text=True, timeout=60
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert f"SUCCESS: {len(exprs)} rules found" in checked.stdout

    def test_every_query_reads_only_exported_metrics(self) -> None:
        """Every metric and matcher label a panel or variable uses exists in consumer/metrics.py."""
        exported = _exported()
        for title, expr in _dashboard_exprs():
            _assert_exported(title, expr, exported)
        for query in _variable_queries():
            match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query)
            assert match, query
            selector = match.group(1)
            for variable, value in _GRAFANA_VARIABLES.items():
                selector = selector.replace(variable, value)
            _assert_exported(f"variable {query}", selector, exported)
            assert match.group(2) in _TARGET_LABELS

    def test_dashboard_shows_what_operators_asked_for(self) -> None:
        """The dashboard covers throughput, DLQ, lag, bursts, analyses, LLM, memory, freshness and repos."""
        used = {name for _, expr in _dashboard_exprs() for name, _ in selectors(expr)}
        wanted = {
            "logagent_events_total",
            "logagent_published_total",
            "logagent_dlq_total",
            "logagent_consumer_lag",
            "logagent_open_bursts",
            "logagent_analyses_total",
            "logagent_llm_seconds_bucket",
            "logagent_llm_tokens_total",
            "logagent_llm_calls_avoided_total",
            "logagent_memory_hits_total",
            "logagent_memory_queries_total",
            "logagent_index_lag_seconds_bucket",
            "logagent_stale_citations_total",
            "logagent_citations_total",
            "logagent_repo_sync_errors_total",
            "logagent_ollama_up",
            "logagent_heuristic_mode",
            "logagent_degraded",
            "logagent_consumer_position_lag",
            "logagent_last_commit_timestamp_seconds",
        }
        assert wanted <= used, f"missing panels for {sorted(wanted - used)}"

    def test_every_query_can_be_narrowed_to_a_cluster_and_a_job(self) -> None:
        """Cluster, namespace, job and pod variables exist, and every panel query filters on all four."""
        dashboard = json.loads(_DASHBOARD.read_text())
        names = [v["name"] for v in dashboard["templating"]["list"]]
        assert names == ["datasource", "cluster", "namespace", "job", "pod"]
        for panel in _walk_panels(dashboard["panels"]):
            for target in panel.get("targets", []):
                for variable in ("$cluster", "$namespace", "$job", "$pod"):
                    assert target["expr"].count(variable) == len(selectors(target["expr"])), (panel["title"], variable)

    def test_a_heuristic_only_install_shows_heuristic_mode_not_down(self) -> None:
        """The LLM stat maps the heuristic-mode value to "heuristic mode" in a calm colour: only a configured
        Ollama that is unreachable shows a red DOWN."""
        dashboard = json.loads(_DASHBOARD.read_text())
        [stat] = [p for p in _walk_panels(dashboard["panels"]) if p["title"] == "LLM" and p["type"] == "stat"]
        assert "logagent_heuristic_mode" in stat["targets"][0]["expr"]
        options = stat["fieldConfig"]["defaults"]["mappings"][0]["options"]
        assert options["2"]["text"] == "heuristic mode" and options["2"]["color"] != "red"
        assert options["0"] == {"text": "DOWN", "color": "red", "index": 0}

    def test_panels_use_the_datasource_variable(self) -> None:
        """Every panel queries the selectable Prometheus data source, so the dashboard imports anywhere."""
        dashboard = json.loads(_DASHBOARD.read_text())
        for panel in _walk_panels(dashboard["panels"]):
            if panel["type"] != "row":
                assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
                assert panel["targets"], panel["title"]


class TestAlertRules:
    def test_rule_file_passes_promtool_check(self) -> None:
        """The rule file the chart ships is valid Prometheus rule syntax."""
        checked = subprocess.run(
            [tool("promtool"), "check", "rules", str(_RULES)], capture_output=True, text=True, timeout=60
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr

    def test_rules_read_only_exported_metrics(self) -> None:
        """Every metric and matcher label an alert uses exists in consumer/metrics.py."""
        exported = _exported()
        for rule in _rules():
            _assert_exported(rule["alert"], rule["expr"], exported)

    def test_promtool_unit_tests_pass(self) -> None:
        """`promtool test rules`: each alert fires on series that should fire it, silent otherwise."""
        tested = subprocess.run(
            [tool("promtool"), "test", "rules", str(_RULE_TESTS)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert tested.returncode == 0, tested.stdout + tested.stderr
        assert "SUCCESS" in tested.stdout

    def test_every_alert_has_a_firing_and_a_silent_case(self) -> None:
        """No alert ships without a unit test that fires it and one that expects silence."""
        alerts = {rule["alert"] for rule in _rules()}
        assert alerts == {
            "LogAgentAbsent",
            "LogAgentNotPublishing",
            "LogAgentCommitsStalled",
            "LogAgentStaleCitationRatioHigh",
            "LogAgentMemoryIndexLagSLO",
            "LogAgentConsumerLagGrowing",
            "LogAgentDLQSpike",
            "LogAgentDLQRate",
            "LogAgentAnalysisFailureRate",
            "LogAgentOllamaUnreachable",
        }
        tests = yaml.safe_load(_RULE_TESTS.read_text())["tests"]
        cases = [case for test in tests for case in test["alert_rule_test"]]
        fires = {case["alertname"] for case in cases if case["exp_alerts"]}
        silent = {case["alertname"] for case in cases if not case["exp_alerts"]}
        assert fires == alerts and silent == alerts
        for case in cases:
            for alert in case["exp_alerts"]:
                # Silent releases "b", "c", "d" share each test with the firing release "a"; an absent
                # target has no series, so its alert carries no namespace.
                if case["alertname"] != "LogAgentAbsent":
                    assert alert["exp_labels"]["namespace"] == "a", case["alertname"]

    def test_both_levels_fire_in_a_test_where_an_alert_has_two(self) -> None:
        """An alert with a warning and a critical rule has a case where each level fires."""
        levels: dict[str, set[str]] = {}
        for rule in _rules():
            levels.setdefault(rule["alert"], set()).add(rule["labels"]["severity"])
        tests = yaml.safe_load(_RULE_TESTS.read_text())["tests"]
        fired = {(case["alertname"], alert["exp_labels"]["severity"])
                 for test in tests for case in test["alert_rule_test"] for alert in case["exp_alerts"]}
        assert {name for name, found in levels.items() if len(found) == 2} >= {
            "LogAgentCommitsStalled", "LogAgentConsumerLagGrowing", "LogAgentDLQSpike"}
        for name, found in levels.items():
            for severity in found:
                assert (name, severity) in fired, (name, severity)
        assert "critical" in {s for found in levels.values() for s in found}

    def test_every_alert_links_its_runbook_section(self) -> None:
        """runbook_url names a section of docs/runbook.md that says what the alert means, first checks and
        fixes (the chart makes it absolute with prometheusRule.runbookBaseUrl)."""
        text = _RUNBOOK.read_text(encoding="utf-8")
        sections = dict(re.findall(r"^## (\S+)\n(.*?)(?=^## |\Z)", text, flags=re.MULTILINE | re.DOTALL))
        anchors = {name.lower(): body for name, body in sections.items()}
        for rule in _rules():
            url = rule["annotations"]["runbook_url"]
            assert url == f"docs/runbook.md#{rule['alert'].lower()}", rule["alert"]
            body = anchors[rule["alert"].lower()]
            assert "**Meaning.**" in body and "**First checks" in body, rule["alert"]
            assert "**Fixes.**" in body or "and fixes.**" in body, rule["alert"]

    def test_every_alert_has_severity_and_description(self) -> None:
        """Alertmanager routing and the on-call reader need a severity, a summary and a description."""
        for rule in _rules():
            assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
            assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
            assert rule.get("for"), rule["alert"]


class TestDashboardLayout:
    def test_panels_do_not_overlap_and_fit_the_grid(self) -> None:
        """Grafana places every panel where the JSON says: none overlaps another or the 24-column grid."""
        dashboard = json.loads(_DASHBOARD.read_text())
        taken: dict[tuple[int, int], str] = {}
        for panel in dashboard["panels"]:
            grid = panel["gridPos"]
            assert grid["x"] + grid["w"] <= 24, panel["title"]
            for x in range(grid["x"], grid["x"] + grid["w"]):
                for y in range(grid["y"], grid["y"] + grid["h"]):
                    assert (x, y) not in taken, f"{panel['title']} overlaps {taken[(x, y)]}"
                    taken[(x, y)] = panel["title"]
        ids = [panel["id"] for panel in dashboard["panels"]]
        assert len(ids) == len(set(ids))
        assert dashboard["uid"] == "logagent"
