"""The chart's optional `logagent notify` Deployment: its values, secrets, probes and settings."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from consumer.settings import Settings
from tests.integration.deploy.test_helm import (
    _CRD_KINDS,
    _KUBE_VERSIONS,
    _field_exists,
    _helm,
    _kubernetes_validate,
    _one,
    _render,
    _render_text,
    helm_env,
)
from tests.paths import PROJECT_ROOT

pytestmark = pytest.mark.integration

__all__ = ["helm_env"]  # the shared fixture, re-exported so pytest finds it here

_CHART = PROJECT_ROOT / "deploy" / "helm" / "logagent"
_VALUES = PROJECT_ROOT / "deploy" / "helm" / "test-values"
_NOTIFY = _VALUES / "notify.yaml"

Doc = dict[str, Any]


@pytest.fixture(scope="module")
def notify_docs(helm_env: dict[str, str]) -> list[Doc]:
    return _render(helm_env, _NOTIFY)


def _named(docs: list[Doc], kind: str, name: str) -> Doc:
    return _one([d for d in docs if d["metadata"]["name"] == name], kind)


def _container(docs: list[Doc]) -> Doc:
    [container] = _one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(container)


class TestRendering:
    def test_off_by_default(self, helm_env: dict[str, str]) -> None:
        """A plain install has no notify objects."""
        assert not [d for d in _render(helm_env) if "notify" in d["metadata"]["name"]]

    def test_lints_strictly(self, helm_env: dict[str, str]) -> None:
        """`helm lint --strict` passes with every sink on."""
        linted = _helm(helm_env, "lint", "--strict", str(_CHART), "-f", str(_NOTIFY))
        assert linted.returncode == 0, linted.stdout + linted.stderr

    @pytest.mark.parametrize("version", _KUBE_VERSIONS)
    def test_objects_pass_strict_validation(self, helm_env: dict[str, str], version: str) -> None:
        """Deployment, ConfigMap and NetworkPolicy of notify validate strictly, with everything else."""
        manifests = _render_text(helm_env, _NOTIFY)
        checked = _kubernetes_validate(manifests, version)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        passed = [line for line in checked.stdout.splitlines() if line.startswith("INFO") and "passed" in line]
        for kind in ("deployment", "configmap", "networkpolicy"):
            assert any(f"resource {kind}/demo-logagent-notify " in line for line in passed), (kind, passed)
        for line in checked.stdout.splitlines():
            if line.startswith("WARN"):
                assert any(kind in line for kind in _CRD_KINDS), line


class TestPod:
    def test_probes_and_command(self, notify_docs: list[Doc]) -> None:
        """`logagent notify` with /livez and /readyz probes on its metrics port."""
        container = _container(notify_docs)
        assert container["args"] == ["notify"]
        assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "metrics"}
        assert container["startupProbe"]["httpGet"] == {"path": "/livez", "port": "metrics"}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
        assert _one(notify_docs, "Deployment")["spec"]["replicas"] == 2

    def test_runs_as_non_root_on_a_read_only_root(self, notify_docs: list[Doc]) -> None:
        """The same hardening as the analysing pods."""
        context = _container(notify_docs)["securityContext"]
        assert context["readOnlyRootFilesystem"] is True and context["runAsNonRoot"] is True
        assert context["capabilities"]["drop"] == ["ALL"] and context["allowPrivilegeEscalation"] is False

    def test_secrets_are_mounted_files_never_values(self, notify_docs: list[Doc]) -> None:
        """Each sink's secret is projected from its existing Secret to the file the settings name; no
        ConfigMap holds a secret, and the Kafka password comes from its Secret too."""
        deployment = _one(notify_docs, "Deployment")
        volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
        projected = {item["path"]: (source["secret"]["name"], item["key"])
                     for source in volumes["notify-secrets"]["projected"]["sources"]
                     for item in source["secret"]["items"]}
        assert projected == {
            "slack-webhook-url": ("slack-oncall", "url"), "webhook-url": ("incident-hook", "url"),
            "webhook-secret": ("incident-hook", "signing-key"), "github-token": ("github-bot", "token"),
            "gitlab-token": ("gitlab-bot", "token")}
        mount = next(m for m in _container(notify_docs)["volumeMounts"] if m["name"] == "notify-secrets")
        config = _named(notify_docs, "ConfigMap", "demo-logagent-notify")["data"]
        files = {key: value for key, value in config.items() if key.endswith("_FILE")}
        assert len(files) == 5
        assert {Path(path).name for path in files.values()} == set(projected)
        assert all(str(Path(path).parent) == mount["mountPath"] for path in files.values())
        env = {e["name"]: e for e in _container(notify_docs)["env"]}
        assert env["LOGAGENT_KAFKA__SASL_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "kafka-credentials"
        assert not any(key.endswith(("__TOKEN", "__SECRET", "__URL", "__WEBHOOK_URL")) for key in config)

    def test_pods_are_apart_from_the_analysing_service(self, notify_docs: list[Doc]) -> None:
        """The main Service and NetworkPolicy do not select notify pods; notify has its own policy."""
        labels = _one(notify_docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
        service = _one(notify_docs, "Service")["spec"]["selector"]
        assert not service.items() <= labels.items()
        policy = _named(notify_docs, "NetworkPolicy", "demo-logagent-notify")["spec"]
        assert policy["podSelector"]["matchLabels"].items() <= labels.items()
        ports = {p["port"] for rule in policy["egress"] for p in rule["ports"]}
        assert {53, 9093, 443} <= ports


class TestSettingsContract:
    def _env(self, docs: list[Doc]) -> dict[str, str]:
        env: dict[str, str] = {}
        for name in ("demo-logagent", "demo-logagent-notify"):
            env.update({k: v for k, v in _named(docs, "ConfigMap", name)["data"].items() if k.startswith("LOGAGENT_")})
        return env

    def test_every_env_var_names_a_settings_field(self, notify_docs: list[Doc]) -> None:
        """No LOGAGENT_NOTIFY__* typo is silently ignored."""
        unknown = [n for n in self._env(notify_docs)
                   if not _field_exists(Settings, n.removeprefix("LOGAGENT_").lower().split("__"))]
        assert not unknown

    def test_rendered_settings_load_with_every_sink_and_route(self, notify_docs: list[Doc],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
        """The two ConfigMaps, plus the pod's Secret-backed variables (stand-in values), parse into Settings:
        four sinks, their routes, targets and secret files."""
        for key in list(os.environ):
            if key.startswith("LOGAGENT_"):
                monkeypatch.delenv(key)
        env = self._env(notify_docs)
        env.update({e["name"]: e.get("value", "from-a-secret") for e in _container(notify_docs)["env"]
                    if e["name"].startswith("LOGAGENT_") and e["name"] not in env})
        env.pop("LOGAGENT_REPOS_FILE")  # mounted from the ConfigMap's repos.json in the pod
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        notify = Settings().notify
        assert set(notify.sinks()) == {"slack", "webhook", "github", "gitlab"}
        assert notify.slack.servers == ["checkout-*", "payments-*"] and notify.slack.min_count == 10
        assert (notify.slack.rate_per_minute, notify.slack.rate_burst, notify.slack.min_confidence) == (20, 3, 0.5)
        assert notify.github.repos == {"checkout-service": "acme/checkout-service"}
        assert notify.github.statuses == ["analyzed", "recurrence", "heuristic"]
        assert notify.gitlab.project == "acme/payments" and notify.retry_attempts == 8
        assert notify.slack.webhook_url is None and notify.slack.webhook_url_file is not None


class TestBadValues:
    @pytest.mark.parametrize(("values", "message"), [
        ("bad-notify-without-sink.yaml", "notify.enabled needs at least one of"),
        ("bad-notify-sink-without-secret.yaml", "the slack-webhook-url secret needs the name"),
        ("bad-notify-github-without-repo.yaml", "notify.github.enabled needs notify.github.repo"),
        ("bad-notify-schema.yaml", "values don't meet the specifications of the schema"),
    ])
    def test_bad_values_fail_before_anything_renders(self, helm_env: dict[str, str], values: str,
                                                     message: str) -> None:
        """Missing sinks, secrets or targets, and schema violations stop the install with a clear message."""
        rendered = _helm(helm_env, "template", "demo", str(_CHART), "-f", str(_VALUES / values))
        assert rendered.returncode != 0
        assert message in rendered.stderr

    def test_schema_names_each_violation(self, helm_env: dict[str, str]) -> None:
        """The schema points at the bad status, the out-of-range confidence and the stray key."""
        rendered = _helm(helm_env, "template", "demo", str(_CHART), "-f", str(_VALUES / "bad-notify-schema.yaml"))
        for path in ("/notify/slack/route/statuses/0", "/notify/slack/route/minConfidence"):
            assert path in rendered.stderr, rendered.stderr
        assert "channel" in rendered.stderr
