"""The Helm chart: it lints, renders valid Kubernetes objects, rejects bad values, runs the service safely."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from analysis.code.repo import RepoSpec
from consumer.settings import Settings
from tests.conftest import tool
from tests.paths import PROJECT_ROOT

pytestmark = pytest.mark.integration

_ROOT = PROJECT_ROOT
_CHART = _ROOT / "deploy" / "helm" / "logagent"
_VALUES = _ROOT / "deploy" / "helm" / "test-values"
_FULL = _VALUES / "full.yaml"
# The oldest Kubernetes the chart declares (Chart.yaml kubeVersion) and the newest the validator ships.
_KUBE_VERSIONS = ("1.27.0", "1.37.0")
_CRD_KINDS = {"ServiceMonitor", "PrometheusRule"}

Doc = dict[str, Any]


@pytest.fixture(scope="module")
def helm_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Helm's cache and config in a throwaway directory: the tests never touch the user's helm setup."""
    home = tmp_path_factory.mktemp("helm-home")
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(HELM_CACHE_HOME=str(home / "cache"), HELM_CONFIG_HOME=str(home / "config"))
    env.update(HELM_DATA_HOME=str(home / "data"))
    return env


def _helm(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool("helm"), *args], capture_output=True, text=True, env=env, timeout=120)


def _template_args(values: Path | None, sets: tuple[str, ...]) -> list[str]:
    args = ["template", "demo", str(_CHART), "--namespace", "obs"]
    if values is not None:
        args += ["-f", str(values)]
    for item in sets:
        args += ["--set", item]
    return args


def _render_text(env: dict[str, str], values: Path | None = None, *sets: str) -> str:
    rendered = _helm(env, *_template_args(values, sets))
    assert rendered.returncode == 0, rendered.stderr
    return rendered.stdout


def _render(env: dict[str, str], values: Path | None = None, *sets: str) -> list[Doc]:
    return [doc for doc in yaml.safe_load_all(_render_text(env, values, *sets)) if doc]


def _one(docs: list[Doc], kind: str) -> Doc:
    found = [doc for doc in docs if doc["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def _kubernetes_validate(manifests: str, version: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "-k", version, "-"],
        input=manifests,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def default_docs(helm_env: dict[str, str]) -> list[Doc]:
    return _render(helm_env)


@pytest.fixture(scope="module")
def full_docs(helm_env: dict[str, str]) -> list[Doc]:
    return _render(helm_env, _FULL)


def _container(docs: list[Doc]) -> Doc:
    containers = _one(docs, "StatefulSet")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


class TestLint:
    @pytest.mark.parametrize("values", [None, _FULL], ids=["default", "full"])
    def test_chart_lints_strictly(self, helm_env: dict[str, str], values: Path | None) -> None:
        """`helm lint --strict` passes with the default values and with every feature switched on."""
        args = ["lint", "--strict", str(_CHART)] + (["-f", str(values)] if values else [])
        linted = _helm(helm_env, *args)
        assert linted.returncode == 0, linted.stdout + linted.stderr
        assert "0 chart(s) failed" in linted.stdout


class TestValuesFile:
    def test_every_key_has_a_comment(self) -> None:
        """Each key of values.yaml is documented on the line above it."""
        lines = (_CHART / "values.yaml").read_text().splitlines()
        undocumented = [
            line.strip()
            for before, line in zip(["#", *lines], lines, strict=False)
            if re.match(r"^\s*[A-Za-z]\w*:", line) and not before.strip().startswith("#")
        ]
        assert not undocumented, undocumented

    def test_keys_are_camel_case(self) -> None:
        """Values keys are camelCase, as Helm users expect (repository ids under `repos` are data)."""

        def keys(node: object) -> Iterator[str]:
            if isinstance(node, dict):
                for key, value in node.items():
                    yield key
                    yield from keys(value)

        for key in keys(yaml.safe_load((_CHART / "values.yaml").read_text())):
            assert re.fullmatch(r"[a-z][A-Za-z0-9]*", key), key


class TestKubernetesSchemas:
    @pytest.mark.parametrize("version", _KUBE_VERSIONS)
    @pytest.mark.parametrize("values", [None, _FULL], ids=["default", "full"])
    def test_rendered_objects_pass_strict_validation(
        self, helm_env: dict[str, str], values: Path | None, version: str
    ) -> None:
        """Every object validates strictly (no unknown fields); only the operator CRDs lack a schema."""
        manifests = _render_text(helm_env, values)
        checked = _kubernetes_validate(manifests, version)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        kinds = {doc["kind"] for doc in yaml.safe_load_all(manifests) if doc}
        passed = [
            line for line in checked.stdout.splitlines() if line.startswith("INFO") and "passed" in line
        ]
        assert len(passed) == len(kinds - _CRD_KINDS) + (1 if "ConfigMap" in kinds else 0)
        for line in checked.stdout.splitlines():
            if line.startswith("WARN"):
                assert any(kind in line for kind in _CRD_KINDS), line

    def test_strict_validation_catches_a_misspelt_field(self, full_docs: list[Doc]) -> None:
        """The validator is strict: a probe under a misspelt key is rejected, so a pass means something."""
        broken = json.loads(json.dumps(_one(full_docs, "StatefulSet")))
        container = broken["spec"]["template"]["spec"]["containers"][0]
        container["readinesProbe"] = container.pop("readinessProbe")
        checked = _kubernetes_validate(yaml.safe_dump(broken), _KUBE_VERSIONS[-1])
        assert checked.returncode != 0
        assert "readinesProbe" in checked.stdout


class TestBadValues:
    @pytest.mark.parametrize(
        ("values", "message"),
        [
            ("bad-schema.yaml", "values don't meet the specifications of the schema"),
            ("bad-replicas-local-memory.yaml", "replicaCount=2 needs shared memory"),
            ("bad-servicemonitor-without-metrics.yaml", "serviceMonitor.enabled needs metrics.enabled"),
            ("bad-sasl-without-secret.yaml", "kafka.sasl.passwordSecret.name"),
        ],
    )
    def test_bad_values_fail_before_anything_renders(
        self, helm_env: dict[str, str], values: str, message: str
    ) -> None:
        """Schema violations and bad combinations stop `helm template` (so install) with a clear message."""
        rendered = _helm(helm_env, *_template_args(_VALUES / values, ()))
        assert rendered.returncode != 0
        assert message in rendered.stderr

    def test_lint_rejects_a_schema_violation(self, helm_env: dict[str, str]) -> None:
        """`helm lint --strict` fails on values the schema rejects (lint treats `fail` as a note only)."""
        linted = _helm(helm_env, "lint", "--strict", str(_CHART), "-f", str(_VALUES / "bad-schema.yaml"))
        assert linted.returncode != 0

    def test_schema_names_each_violation(self, helm_env: dict[str, str]) -> None:
        """The schema names the wrong type, the root user, the bad enum, the bad URI and the stray key."""
        rendered = _helm(helm_env, *_template_args(_VALUES / "bad-schema.yaml", ()))
        for path in ("/replicaCount", "/securityContext/runAsUser", "/kafka/securityProtocol", "/memory/uri"):
            assert path in rendered.stderr
        assert "unknownKey" in rendered.stderr

    def test_replicas_scale_with_shared_memory(self, helm_env: dict[str, str]) -> None:
        """The same replica count that fails with local memory renders once memory is in an object store."""
        docs = _render(helm_env, _VALUES / "bad-replicas-local-memory.yaml", "memory.uri=s3://bucket/memory")
        assert _one(docs, "StatefulSet")["spec"]["replicas"] == 2


class TestPodSpec:
    def test_runs_as_non_root_on_a_read_only_root(self, default_docs: list[Doc]) -> None:
        """The pod runs as uid 10001, never root, without privilege escalation or capabilities."""
        pod = _one(default_docs, "StatefulSet")["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 10001
        assert pod["automountServiceAccountToken"] is False
        context = _container(default_docs)["securityContext"]
        assert context["runAsNonRoot"] is True
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"]["drop"] == ["ALL"]

    def test_every_writable_path_is_a_bounded_volume(self, default_docs: list[Doc]) -> None:
        """/tmp and the repo cache are size-limited emptyDirs; the data dir is the per-pod claim."""
        statefulset = _one(default_docs, "StatefulSet")
        volumes = {v["name"]: v for v in statefulset["spec"]["template"]["spec"]["volumes"]}
        claims = {c["metadata"]["name"] for c in statefulset["spec"]["volumeClaimTemplates"]}
        writable = [m for m in _container(default_docs)["volumeMounts"] if not m.get("readOnly")]
        assert {m["mountPath"] for m in writable} == {
            "/tmp",
            "/var/lib/logagent",
            "/var/cache/logagent/repos",
        }
        for mount in writable:
            if mount["name"] in claims:
                continue
            assert volumes[mount["name"]]["emptyDir"]["sizeLimit"], mount

    def test_probes_hit_livez_and_readyz_on_the_metrics_port(self, default_docs: list[Doc]) -> None:
        """Liveness and startup use /livez, readiness /readyz, on the named port the service listens on."""
        container = _container(default_docs)
        assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "metrics"}
        assert container["startupProbe"]["httpGet"] == {"path": "/livez", "port": "metrics"}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
        assert container["ports"] == [{"name": "metrics", "containerPort": 9464, "protocol": "TCP"}]
        service = _one(default_docs, "Service")
        assert service["spec"]["ports"][0]["name"] == "metrics"
        assert container["args"] == ["run"]

    def test_full_values_reach_the_pod(self, full_docs: list[Doc]) -> None:
        """Scheduling, resources and the SASL password secret from the values land in the pod spec."""
        pod = _one(full_docs, "StatefulSet")["spec"]["template"]["spec"]
        container = _container(full_docs)
        assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
        assert pod["tolerations"][0]["key"] == "dedicated"
        assert container["resources"]["limits"]["memory"] == "4Gi"
        env = {e["name"]: e for e in container["env"]}
        assert env["LOGAGENT_KAFKA__SASL_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
            "name": "kafka-credentials",
            "key": "sasl-password",
        }


class TestMemoryModes:
    def test_local_memory_gets_a_claim_per_pod(self, default_docs: list[Doc]) -> None:
        """With local memory each pod gets its own PersistentVolumeClaim for the data directory."""
        statefulset = _one(default_docs, "StatefulSet")
        assert statefulset["spec"]["replicas"] == 1
        [claim] = statefulset["spec"]["volumeClaimTemplates"]
        assert claim["metadata"]["name"] == "data"
        assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
        volumes = {v["name"] for v in statefulset["spec"]["template"]["spec"]["volumes"]}
        assert "data" not in volumes

    def test_shared_memory_needs_no_claim_and_scales(self, full_docs: list[Doc]) -> None:
        """With s3:// memory there is no claim, the data dir is scratch, and three replicas run."""
        statefulset = _one(full_docs, "StatefulSet")
        assert statefulset["spec"]["replicas"] == 3
        assert "volumeClaimTemplates" not in statefulset["spec"]
        volumes = {v["name"]: v for v in statefulset["spec"]["template"]["spec"]["volumes"]}
        assert volumes["data"]["emptyDir"]["sizeLimit"] == "20Gi"
        config = _one([d for d in full_docs if d["metadata"]["name"] == "demo-logagent"], "ConfigMap")
        assert config["data"]["LOGAGENT_MEMORY__URI"] == "s3://logagent-memory/prod"
        assert config["data"]["LOGAGENT_MEMORY__STORAGE__REGION"] == "eu-west-1"
        env = {e["name"]: e for e in _container(full_docs)["env"]}
        assert env["LOGAGENT_MEMORY__STORAGE__SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"] == {
            "name": "logagent-s3",
            "key": "secret",
        }


def _settings_config(docs: list[Doc]) -> dict[str, str]:
    return dict(_one([d for d in docs if d["metadata"]["name"] == "demo-logagent"], "ConfigMap")["data"])


def _field_exists(model: type[BaseModel], path: list[str]) -> bool:
    field = model.model_fields.get(path[0])
    if field is None:
        return False
    if len(path) == 1:
        return True
    nested = field.annotation
    return isinstance(nested, type) and issubclass(nested, BaseModel) and _field_exists(nested, path[1:])


class TestSettingsContract:
    def test_every_env_var_names_a_settings_field(self, full_docs: list[Doc]) -> None:
        """Each LOGAGENT_* variable the chart sets is a field of Settings (no silently ignored typos)."""
        names = [k for k in _settings_config(full_docs) if k.startswith("LOGAGENT_")]
        names += [e["name"] for e in _container(full_docs)["env"] if e["name"].startswith("LOGAGENT_")]
        unknown = [
            n for n in names if not _field_exists(Settings, n.removeprefix("LOGAGENT_").lower().split("__"))
        ]
        assert not unknown, f"not fields of Settings: {unknown}"

    def test_rendered_settings_load(self, full_docs: list[Doc], monkeypatch: pytest.MonkeyPatch) -> None:
        """The ConfigMap's values parse into Settings with the types the service expects."""
        for key in list(os.environ):
            if key.startswith("LOGAGENT_"):
                monkeypatch.delenv(key)
        for key, value in _settings_config(full_docs).items():
            if key.startswith("LOGAGENT_"):
                monkeypatch.setenv(key, value)
        settings = Settings()
        assert settings.http.port == 9500
        assert settings.input.max_message_bytes == 2_097_152
        assert settings.input.in_app_prefixes == ["com.example.", "payments"]
        assert settings.window.quiet_s == 45.0
        assert settings.kafka.bootstrap_servers == "broker-0.kafka:9093,broker-1.kafka:9093"
        assert settings.ollama.url == "http://ollama.llm.svc:11434"

    def test_repo_map_matches_the_mounted_tokens(self, full_docs: list[Doc]) -> None:
        """repos.json parses as RepoSpec; each token file is mounted and each token env var is set."""
        repos = json.loads(_settings_config(full_docs)["repos.json"])
        specs = {server: RepoSpec.model_validate(spec) for server, spec in repos.items()}
        assert set(specs) == {"payments-api", "checkout.web", "public-lib"}
        container = _container(full_docs)
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        env = {e["name"]: e for e in container["env"]}
        volumes = {
            v["name"]: v for v in _one(full_docs, "StatefulSet")["spec"]["template"]["spec"]["volumes"]
        }
        projected = {
            item["path"]: source["secret"]["name"]
            for source in volumes["git-tokens"]["projected"]["sources"]
            for item in source["secret"]["items"]
        }
        payments = specs["payments-api"]
        assert payments.token_file is not None and str(payments.token_file.parent) in mounts
        assert projected == {payments.token_file.name: "git-tokens"}
        checkout = specs["checkout.web"]
        assert checkout.token_env is not None and checkout.branch == "release"
        assert env[checkout.token_env]["valueFrom"]["secretKeyRef"] == {
            "name": "checkout-token",
            "key": "token",
        }
        assert specs["public-lib"].token_env is None and specs["public-lib"].token_file is None

    def test_config_checksum_rolls_pods_only_on_change(self, helm_env: dict[str, str]) -> None:
        """The pod template's checksum changes with the repository map and stays put otherwise."""

        def checksum(*sets: str) -> str:
            template = _one(_render(helm_env, None, *sets), "StatefulSet")["spec"]["template"]
            return str(template["metadata"]["annotations"]["checksum/config"])

        assert checksum() == checksum()
        assert checksum() != checksum("repos.api.url=https://git.example.com/api.git")


class TestMonitoring:
    def test_service_monitor_scrapes_the_metrics_port(self, full_docs: list[Doc]) -> None:
        """The ServiceMonitor selects the chart's Service by its labels and scrapes its `metrics` port."""
        monitor = _one(full_docs, "ServiceMonitor")
        service = _one(full_docs, "Service")
        selector = monitor["spec"]["selector"]["matchLabels"]
        assert selector.items() <= service["metadata"]["labels"].items()
        assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"] == "metrics"
        assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"

    def test_prometheus_rule_is_the_checked_rule_file(self, full_docs: list[Doc], tmp_path: Path) -> None:
        """The rendered PrometheusRule passes promtool, drops disabled alerts and carries the extra labels."""
        rule = _one(full_docs, "PrometheusRule")
        rule_file = tmp_path / "rendered-rules.yaml"
        rule_file.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
        checked = subprocess.run(
            [tool("promtool"), "check", "rules", str(rule_file)], capture_output=True, text=True, timeout=60
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
        alerts = {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}
        source = yaml.safe_load((_CHART / "rules" / "logagent-rules.yaml").read_text())
        expected = {r["alert"] for group in source["groups"] for r in group["rules"]} - {"LogAgentDLQSpike"}
        assert set(alerts) == expected
        for group in rule["spec"]["groups"]:
            for alert in group["rules"]:
                assert alert["labels"]["team"] == "platform"
                assert alert["labels"]["severity"] in {"warning", "critical"}

    def test_no_ollama_alert_in_heuristic_mode(self, helm_env: dict[str, str]) -> None:
        """Without an Ollama URL the service is heuristic by choice, so the unreachable alert is left out."""
        docs = _render(helm_env, None, "prometheusRule.enabled=true")
        rule = _one(docs, "PrometheusRule")
        alerts = {r["alert"] for group in rule["spec"]["groups"] for r in group["rules"]}
        assert "LogAgentOllamaUnreachable" not in alerts and "LogAgentDLQSpike" in alerts

    def test_operator_objects_are_off_by_default(self, default_docs: list[Doc]) -> None:
        """A plain install needs no Prometheus Operator CRDs."""
        assert not {doc["kind"] for doc in default_docs} & _CRD_KINDS

    def test_dashboard_config_map_is_labelled_for_the_sidecar(self, full_docs: list[Doc]) -> None:
        """The dashboard ConfigMap has the sidecar label, the chosen namespace and the shipped JSON."""
        [dashboard] = [
            d for d in full_docs if d["kind"] == "ConfigMap" and "dashboard" in d["metadata"]["name"]
        ]
        assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert dashboard["metadata"]["namespace"] == "monitoring"
        assert dashboard["metadata"]["annotations"] == {"grafana_folder": "Log Agent"}
        shipped = json.loads((_CHART / "dashboards" / "logagent.json").read_text())
        assert json.loads(dashboard["data"]["logagent.json"]) == shipped

    def test_network_policy_allows_dns_and_the_configured_ports(self, full_docs: list[Doc]) -> None:
        """Egress allows DNS and Kafka, Ollama and git ports; ingress only the metrics port."""
        policy = _one(full_docs, "NetworkPolicy")["spec"]
        egress_ports = {
            (p["port"], p["protocol"]) for rule in policy["egress"] for p in rule.get("ports", [])
        }
        assert {(53, "UDP"), (53, "TCP"), (9093, "TCP"), (11434, "TCP"), (443, "TCP")} <= egress_ports
        assert [p["port"] for rule in policy["ingress"] for p in rule["ports"]] == ["metrics"]


class TestNotes:
    def test_notes_say_how_to_reach_metrics_and_the_dashboard(self, helm_env: dict[str, str]) -> None:
        """After install the user sees a port-forward command for /metrics and where the dashboard is."""
        installed = _helm(helm_env, "install", "demo", str(_CHART), "--namespace", "obs", "--dry-run=client")
        assert installed.returncode == 0, installed.stderr
        notes = installed.stdout.split("NOTES:", 1)[1]
        assert "kubectl --namespace obs port-forward pod/demo-logagent-0 9464:9464" in notes
        assert "/metrics" in notes and "/readyz" in notes
        assert "ConfigMap obs/demo-logagent-dashboard-logagent" in notes
