"""The Helm chart: it lints, renders valid Kubernetes objects, rejects bad values, runs the service safely."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from analysis.code.repo import RepoSpec
from consumer.cli.config import load_settings
from consumer.settings import InputSettings, KafkaSettings, Settings
from tests.conftest import tool
from tests.paths import PROJECT_ROOT

pytestmark = pytest.mark.integration

_ROOT = PROJECT_ROOT
_CHART = _ROOT / "deploy" / "helm" / "logagent"
_VALUES = _ROOT / "deploy" / "helm" / "test-values"
_FULL = _VALUES / "full.yaml"
_PODMONITOR = _VALUES / "podmonitor.yaml"
# Every rendered variant: the defaults, everything on (ServiceMonitor path), the PodMonitor path, notify.
_VARIANTS = {"default": None, "full": _FULL, "podmonitor": _PODMONITOR, "notify": _VALUES / "notify.yaml"}
# The oldest Kubernetes the chart declares (Chart.yaml kubeVersion) and the newest the validator ships.
_KUBE_VERSIONS = ("1.27.0", "1.37.0")
_CRD_KINDS = {"ServiceMonitor", "PrometheusRule", "PodMonitor"}
_RUNBOOK_BASE = "https://git.example.com/platform/logagent/blob/v0.1.0"

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


def _charts(helm_env: dict[str, str], tmp_path: Path, values: dict[str, Any]) -> bool:
    """Whether the chart renders with `values` (and a group id of its own)."""
    values.setdefault("kafka", {}).setdefault("groupId", "logagent-t")
    path = tmp_path / "values.yaml"
    path.write_text(json.dumps(values))
    return _helm(helm_env, *_template_args(path, ())).returncode == 0


def _serves(settings: Callable[..., object], **fields: object) -> bool:
    """Whether the service takes `fields` in the settings group `settings`."""
    try:
        settings(**fields)
    except ValueError:
        return False
    return True


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
    @pytest.mark.parametrize("variant", list(_VARIANTS))
    def test_rendered_objects_pass_strict_validation(
        self, helm_env: dict[str, str], variant: str, version: str
    ) -> None:
        """Every object validates strictly (no unknown fields); only the operator CRDs lack a schema here
        (TestOperatorSchemas checks those)."""
        manifests = _render_text(helm_env, _VARIANTS[variant])
        checked = _kubernetes_validate(manifests, version)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        docs = [doc for doc in yaml.safe_load_all(manifests) if doc]
        passed = [
            line for line in checked.stdout.splitlines() if line.startswith("INFO") and "passed" in line
        ]
        assert len(passed) == len([doc for doc in docs if doc["kind"] not in _CRD_KINDS])
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


def _operator_problems(doc: Doc) -> list[str]:
    """Why `doc` does not meet its Prometheus Operator CRD schema: type and pattern errors from the CRD's
    OpenAPI schema (as models), and every field the schema does not know, which the API server's strict
    field validation would refuse (found as what a round trip through the model drops)."""
    # Imported here: its thousands of models take seconds, which every xdist worker paid at collection.
    from cloudcoil.models.prometheus_operator import v1 as operator

    model = getattr(operator, doc["kind"])
    try:
        parsed = model.model_validate(doc)
    except ValidationError as error:
        return [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors()]
    kept = parsed.model_dump(by_alias=True, exclude_unset=True, mode="json")
    return [f"unknown field {path}" for path in _dropped(doc, kept, doc["kind"])]


def _dropped(given: object, kept: object, path: str) -> list[str]:
    if isinstance(given, dict) and isinstance(kept, dict):
        return [p for key, value in given.items()
                for p in ([f"{path}.{key}"] if key not in kept else _dropped(value, kept[key], f"{path}.{key}"))]
    if isinstance(given, list) and isinstance(kept, list):
        return [p for i, (a, b) in enumerate(zip(given, kept, strict=False)) for p in _dropped(a, b, f"{path}[{i}]")]
    return []


class TestOperatorSchemas:
    @pytest.mark.parametrize("variant", list(_VARIANTS))
    def test_operator_objects_meet_their_crd_schemas(self, helm_env: dict[str, str], variant: str) -> None:
        """ServiceMonitor, PodMonitor and PrometheusRule validate against the operator's CRD schemas, offline
        (the schemas ship as models in the cloudcoil-models-prometheus-operator package)."""
        docs = [doc for doc in _render(helm_env, _VARIANTS[variant]) if doc["kind"] in _CRD_KINDS]
        expected = {"default": set(), "full": {"ServiceMonitor", "PrometheusRule"},
                    "podmonitor": {"PodMonitor", "PrometheusRule"}, "notify": set()}[variant]
        assert {doc["kind"] for doc in docs} == expected
        for doc in docs:
            assert _operator_problems(doc) == [], doc["kind"]

    def test_the_check_catches_an_unknown_field_and_a_bad_value(self, full_docs: list[Doc]) -> None:
        """A misspelt endpoint field and an interval the CRD's pattern refuses are both reported."""
        monitor = json.loads(json.dumps(_one(full_docs, "ServiceMonitor")))
        monitor["spec"]["endpoints"][0]["scrapeTimout"] = "5s"
        assert _operator_problems(monitor) == ["unknown field ServiceMonitor.spec.endpoints[0].scrapeTimout"]
        monitor = json.loads(json.dumps(_one(full_docs, "ServiceMonitor")))
        monitor["spec"]["endpoints"][0]["interval"] = "every minute"
        assert any("interval" in problem for problem in _operator_problems(monitor))


class TestBadValues:
    @pytest.mark.parametrize(
        ("values", "message"),
        [
            ("bad-schema.yaml", "values don't meet the specifications of the schema"),
            ("bad-replicas-local-memory.yaml", "replicaCount=2 needs shared memory"),
            ("bad-servicemonitor-without-metrics.yaml", "serviceMonitor.enabled needs metrics.enabled"),
            ("bad-sasl-without-secret.yaml", "kafka.sasl.passwordSecret.name"),
            ("bad-two-monitors.yaml", "would scrape every pod twice"),
            ("bad-ondelete-with-rolling-update.yaml", "updateStrategy.rollingUpdate applies to type RollingUpdate"),
            ("bad-tenant-on-the-default-group.yaml", "give it a kafka.groupId of its own"),
        ],
    )
    def test_bad_values_fail_before_anything_renders(
        self, helm_env: dict[str, str], values: str, message: str
    ) -> None:
        """Schema violations and bad combinations stop `helm template` (so install) with a clear message."""
        rendered = _helm(helm_env, *_template_args(_VALUES / values, ()))
        assert rendered.returncode != 0
        assert message in rendered.stderr

    def test_the_schema_takes_no_pinned_tenant_the_service_refuses(self, helm_env: dict[str, str],
                                                                   tmp_path: Path) -> None:
        """A tenant the chart installs but the service refuses crash-loops every pod (attacker review: NBSP,
        ZWSP, ideographic space). Every character class the rule names, plain text and a symbol of a newer
        Unicode than the service's: the schema takes what `input.tenant` takes."""
        samples = ["acme", "a b", "a  b", " acme", "acme ", "é", "\u00a0", "\u200b", "\u3000", "\u2028", "\u0085",
                   "\t", "\x7f", "\ue000", "\U0001f6dc", "\u0378", "\u2003x", "x\u202e"]
        for sample in samples:
            tenant = sample if sample.strip() != sample or " " in sample or len(sample) > 2 else f"a{sample}b"
            charted = _charts(helm_env, tmp_path, {"input": {"tenant": tenant}})
            served = _serves(InputSettings, tenant=tenant)
            assert served or not charted, repr(tenant)  # the pods would crash-loop
            # Unassigned code points (to this Python) the chart may refuse: only ever stricter.
            assert charted == served or unicodedata.category(sample[-1]) == "Cn", repr(tenant)

    def test_the_schema_takes_the_brokers_and_levels_the_service_takes(self, helm_env: dict[str, str],
                                                                       tmp_path: Path) -> None:
        """A trial: `http://kafka:9092` rendered and crash-looped the pods, while `kafka` (port 9092, as the
        service and Kafka's clients take it) and `logLevel=debug` were refused. The chart never takes what
        the service refuses, and takes the usual spellings it takes."""
        usual = ["kafka", "kafka:9092", "a:1,b:65535", "[::1]:9092", "10.0.0.7:9094,kafka-1.kafka:9092", "[fe80::1]"]
        refused = ["http://kafka:9092", "kafka:0", "kafka:65536", "kafka:abc", "::1:9092", "kafka:9092,", "a b:1", ""]
        for servers in usual + refused:
            charted = _charts(helm_env, tmp_path, {"kafka": {"bootstrapServers": servers}})
            served = _serves(KafkaSettings, bootstrap_servers=servers)
            assert served or not charted, servers  # the pods would crash-loop
            assert charted == (servers in usual), servers
        for level in ("debug", "DEBUG", "Info", "warning"):
            assert _charts(helm_env, tmp_path, {"logLevel": level}), level

    def test_lint_rejects_a_schema_violation(self, helm_env: dict[str, str]) -> None:
        """`helm lint --strict` fails on values the schema rejects (lint treats `fail` as a note only)."""
        linted = _helm(helm_env, "lint", "--strict", str(_CHART), "-f", str(_VALUES / "bad-schema.yaml"))
        assert linted.returncode != 0

    def test_schema_names_each_violation(self, helm_env: dict[str, str]) -> None:
        """The schema names the wrong type, the root user, the bad enum, the bad URI and the stray key."""
        rendered = _helm(helm_env, *_template_args(_VALUES / "bad-schema.yaml", ()))
        for path in ("/replicaCount", "/securityContext/runAsUser", "/kafka/securityProtocol", "/memory/uri",
                     "/podSecurityContext", "/image/digest", "/podDisruptionBudget/maxUnavailable"):
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

    def test_optional_pod_knobs_reach_the_pod(self, full_docs: list[Doc]) -> None:
        """Digest, extra pod security fields, lifecycle hooks, zone spread and the update strategy land
        where Kubernetes reads them; the chart's non-root user stays."""
        statefulset = _one(full_docs, "StatefulSet")
        pod = statefulset["spec"]["template"]["spec"]
        container = _container(full_docs)
        assert container["image"].endswith(":0.1.0@sha256:" + "0123456789abcdef" * 4)
        assert pod["securityContext"]["supplementalGroups"] == [20000]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
        assert container["lifecycle"] == {"preStop": {"exec": {"command": ["sleep", "5"]}}}
        [spread] = pod["topologySpreadConstraints"]
        assert spread["labelSelector"]["matchLabels"] == statefulset["spec"]["selector"]["matchLabels"]
        assert statefulset["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
        assert _settings_config(full_docs)["LOGAGENT_READINESS__BROKER_GRACE_S"] == "90"

    def test_the_defaults_roll_one_pod_at_a_time_and_set_no_budget(self, default_docs: list[Doc]) -> None:
        """A plain install updates with RollingUpdate and creates no PodDisruptionBudget."""
        assert _one(default_docs, "StatefulSet")["spec"]["updateStrategy"] == {"type": "RollingUpdate"}
        assert "PodDisruptionBudget" not in {doc["kind"] for doc in default_docs}
        assert ":0.1.0" in _container(default_docs)["image"] and "@" not in _container(default_docs)["image"]

    @pytest.mark.parametrize(("variant", "budget"), [("full", {"minAvailable": 2}),
                                                     ("podmonitor", {"maxUnavailable": "50%"})])
    def test_the_disruption_budget_selects_the_pods(self, helm_env: dict[str, str], variant: str,
                                                    budget: dict[str, object]) -> None:
        """minAvailable when given, else maxUnavailable; the selector is the StatefulSet's."""
        docs = _render(helm_env, _VARIANTS[variant])
        spec = _one(docs, "PodDisruptionBudget")["spec"]
        assert {k: v for k, v in spec.items() if k != "selector"} == budget
        assert spec["selector"] == _one(docs, "StatefulSet")["spec"]["selector"]

    def test_full_values_reach_the_pod(self, full_docs: list[Doc]) -> None:
        """Scheduling, resources, the SASL password and the redaction id key secrets from the values land in
        the pod spec."""
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
        assert env["LOGAGENT_REDACTION__ID_KEY"]["valueFrom"]["secretKeyRef"] == {
            "name": "logagent-redaction",
            "key": "id-key",
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
        """The pod's environment (ConfigMap values, plus the Secret-backed variables with stand-in values)
        loads through the service's own start-up check: no unknown variable, every value valid."""
        for key in list(os.environ):
            if key.startswith("LOGAGENT_"):
                monkeypatch.delenv(key)
        environ = {k: v for k, v in _settings_config(full_docs).items() if k.startswith("LOGAGENT_")}
        environ.pop("LOGAGENT_REPOS_FILE")  # mounted from the ConfigMap's repos.json in the pod
        for entry in _container(full_docs)["env"]:
            if entry["name"].startswith("LOGAGENT_"):
                environ[entry["name"]] = entry.get("value", "a-value-from-a-secret")
        for key, value in environ.items():
            monkeypatch.setenv(key, value)
        settings = load_settings(environ)
        assert settings.http.port == 9500
        assert settings.input.max_message_bytes == 2_097_152
        assert settings.input.in_app_prefixes == ["com.example.", "payments"]
        assert settings.window.quiet_s == 45.0
        assert settings.kafka.bootstrap_servers == "broker-0.kafka:9093,broker-1.kafka:9093"
        assert settings.ollama.url == "http://ollama.llm.svc:11434"
        assert (settings.repartition.topic, settings.repartition.partitions) == ("logagent-bursts", 24)
        assert (settings.repartition.replication_factor, settings.repartition.compression) == (2, "zstd")
        assert settings.repartition.retention_ms == 43_200_000 and settings.repartition.create
        assert not settings.input.keyed_by_server

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
        endpoint = monitor["spec"]["endpoints"][0]
        assert endpoint["relabelings"][0]["targetLabel"] == "node"
        assert endpoint["metricRelabelings"][0]["action"] == "drop"

    def test_pod_monitor_scrapes_the_pods_without_a_service_port(self, helm_env: dict[str, str]) -> None:
        """With podMonitor on and metrics off, the PodMonitor selects the pods' named port directly."""
        docs = _render(helm_env, _PODMONITOR)
        monitor = _one(docs, "PodMonitor")
        statefulset = _one(docs, "StatefulSet")
        assert monitor["spec"]["selector"]["matchLabels"] == statefulset["spec"]["selector"]["matchLabels"]
        [endpoint] = monitor["spec"]["podMetricsEndpoints"]
        assert (endpoint["port"], endpoint["interval"]) == ("metrics", "20s")
        assert endpoint["relabelings"][0]["targetLabel"] == "tenant_namespace"
        assert "ports" not in _one(docs, "Service")["spec"]
        assert "ServiceMonitor" not in {doc["kind"] for doc in docs}

    def test_alerts_are_scoped_to_the_release_and_link_the_runbook(self, full_docs: list[Doc]) -> None:
        """The absent-target alert watches this release's job only, and every runbook link is absolute
        under runbookBaseUrl, pointing at the alert's section of docs/runbook.md."""
        rules = [r for group in _one(full_docs, "PrometheusRule")["spec"]["groups"] for r in group["rules"]]
        absent = next(r for r in rules if r["alert"] == "LogAgentAbsent")
        assert 'up{namespace="obs", job=~"(obs/)?demo-logagent"}' in absent["expr"]
        for rule in rules:
            assert rule["annotations"]["runbook_url"] == (
                f"{_RUNBOOK_BASE}/docs/runbook.md#{rule['alert'].lower()}"), rule["alert"]

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
        assert {p["port"] for rule in policy["ingress"] for p in rule["ports"]} == {"metrics"}
        # Besides the scrapers, only this release's `helm test` pod may call the endpoint.
        assert policy["ingress"][-1]["from"] == [{"podSelector": {"matchLabels": {
            "app.kubernetes.io/instance": "demo", "app.kubernetes.io/component": "test"}}}]


class TestHelmTest:
    def test_the_test_pod_checks_every_replica(self, full_docs: list[Doc]) -> None:
        """A `helm test` hook pod runs the chart's check script with the image, against each replica's
        stable name; it runs as the chart's non-root user on a read-only root."""
        [pod] = [doc for doc in full_docs if doc["kind"] == "Pod"]
        assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
        [container] = pod["spec"]["containers"]
        script = (_CHART / "files" / "check_endpoints.py").read_text()
        assert container["command"] == ["python", "-c", script]
        assert container["image"] == _container(full_docs)["image"]
        targets = {e["name"]: e["value"] for e in container["env"]}["TARGETS"].split()
        assert targets == [f"http://demo-logagent-{i}.demo-logagent.obs.svc:9500" for i in range(3)]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True

    def test_it_can_be_left_out(self, helm_env: dict[str, str]) -> None:
        """tests.enabled=false renders no test pod."""
        assert "Pod" not in {doc["kind"] for doc in _render(helm_env, _PODMONITOR)}


class TestChartReadme:
    def test_the_readme_is_generated_from_values(self) -> None:
        """The committed README is what deploy/chart_readme.py makes of values.yaml (rerun it after an edit)."""
        readme = _load_readme_module()
        assert (_CHART / "README.md").read_text() == readme.render((_CHART / "values.yaml").read_text())

    def test_every_value_has_a_row_with_its_default(self) -> None:
        """Each leaf of values.yaml (or an empty group) is a row, and its default is the value's JSON."""
        readme = _load_readme_module()
        text = (_CHART / "values.yaml").read_text()
        rows = {line.split("|")[1].strip().strip("`"): line.split("|")[3].strip().strip("`")
                for line in readme.render(text).splitlines() if line.startswith("| `")}

        def leaves(node: object, prefix: str) -> Iterator[tuple[str, object]]:
            if isinstance(node, dict) and node and prefix != "repos":
                for key, value in node.items():
                    yield from leaves(value, f"{prefix}.{key}" if prefix else key)
            else:
                yield prefix, node

        for key, value in leaves(yaml.safe_load(text), ""):
            assert key in rows, key
            assert json.loads(rows[key].replace("\\|", "|")) == value, key

    def test_a_changed_default_makes_the_readme_stale(self) -> None:
        """The check can fail: another default renders another README."""
        readme = _load_readme_module()
        text = (_CHART / "values.yaml").read_text()
        assert readme.render(text.replace("replicaCount: 1", "replicaCount: 2")) != readme.render(text)


def _load_readme_module() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("chart_readme", _ROOT / "deploy" / "chart_readme.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class TestPackage:
    def test_make_chart_packages_the_project_version(self, helm_env: dict[str, str], tmp_path: Path) -> None:
        """deploy/chart.sh (make chart) writes logagent-<version>.tgz, whose Chart.yaml is the project's version."""
        import tomllib

        version = tomllib.loads((_ROOT / "pyproject.toml").read_text())["project"]["version"]
        packaged = _chart_sh(helm_env, {"CHART_OUT": str(tmp_path)})
        assert packaged.returncode == 0, packaged.stdout + packaged.stderr
        archive = tmp_path / f"logagent-{version}.tgz"
        shown = _helm(helm_env, "show", "chart", str(archive))
        assert yaml.safe_load(shown.stdout)["appVersion"] == version

    def test_a_chart_version_other_than_the_project_s_is_refused(self, helm_env: dict[str, str],
                                                                 tmp_path: Path) -> None:
        """A chart whose version drifted from pyproject.toml is not packaged, and the message says both."""
        import shutil

        chart = tmp_path / "logagent"
        shutil.copytree(_CHART, chart)
        manifest = chart / "Chart.yaml"
        manifest.write_text(manifest.read_text().replace("version: 0.1.0", "version: 0.2.0"))
        packaged = _chart_sh(helm_env, {"CHART_DIR": str(chart), "CHART_OUT": str(tmp_path / "out")})
        assert packaged.returncode != 0
        assert "version is 0.2.0, the project is 0.1.0" in packaged.stderr
        assert not (tmp_path / "out").exists()


def _chart_sh(helm_env: dict[str, str], extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(_ROOT / "deploy" / "chart.sh")], capture_output=True, text=True,
                          env={**helm_env, "HELM": tool("helm"), **extra}, timeout=120, check=False)


class TestNotes:
    def test_notes_say_how_to_reach_metrics_and_the_dashboard(self, helm_env: dict[str, str]) -> None:
        """After install the user sees a port-forward command for /metrics and where the dashboard is."""
        installed = _helm(helm_env, "install", "demo", str(_CHART), "--namespace", "obs", "--dry-run=client")
        assert installed.returncode == 0, installed.stderr
        notes = installed.stdout.split("NOTES:", 1)[1]
        assert "kubectl --namespace obs port-forward pod/demo-logagent-0 9464:9464" in notes
        assert "/metrics" in notes and "/readyz" in notes
        assert "ConfigMap obs/demo-logagent-dashboard-logagent" in notes
        assert "helm test demo --namespace obs" in notes
