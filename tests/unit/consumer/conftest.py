"""Fixtures of the consumer's unit tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No LOGAGENT_* variable of the machine leaks in; the data dir is a throwaway one."""
    for name in list(os.environ):
        if name.upper().startswith("LOGAGENT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LOGAGENT_DATA_DIR", str(tmp_path / "data"))
