"""The build the metrics name: logagent_build_info's version and commit."""

from __future__ import annotations

import subprocess
import tomllib

from consumer.metrics import Metrics, build_info
from tests.paths import PROJECT_ROOT


class TestBuildInfo:
    def test_names_the_installed_version_and_the_checkout_s_commit(self) -> None:
        """From a source checkout: the package version of pyproject.toml and the short HEAD sha (an image
        build stamps consumer/commit.txt instead)."""
        version, commit = build_info()
        assert version == tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["version"]
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
        assert commit == head

    def test_is_one_series_with_both_labels(self) -> None:
        """The gauge is 1 under the build's labels, the way dashboards join it to other series."""
        metrics = Metrics()
        version, commit = build_info()
        metrics.build_info.labels(version, commit).set(1)
        assert metrics.registry.get_sample_value("logagent_build_info", {"version": version, "commit": commit}) == 1
