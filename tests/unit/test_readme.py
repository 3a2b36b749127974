"""The README's configuration table documents every setting."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from consumer.settings import Settings

_README = Path(__file__).resolve().parents[2] / "README.md"


def _env_vars(model: type[BaseModel], prefix: str = "LOGAGENT_") -> Iterator[str]:
    """Every leaf setting's environment variable, nested groups joined with `__`."""
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _env_vars(annotation, f"{prefix}{name.upper()}__")
        else:
            yield f"{prefix}{name.upper()}"


def _table_rows() -> set[str]:
    """The environment variables named in the first column of the README's table."""
    lines = _README.read_text(encoding="utf-8").splitlines()
    return {line.split("|")[1].strip().strip("`") for line in lines if line.startswith("| `LOGAGENT_")}


class TestReadmeConfiguration:
    def test_every_setting_has_a_row(self) -> None:
        """Each setting of consumer/settings.py appears as a row of the README table."""
        missing = sorted(set(_env_vars(Settings)) - _table_rows())
        assert not missing, f"add these settings to the README configuration table: {missing}"

    def test_no_row_for_a_setting_that_does_not_exist(self) -> None:
        """The table does not document settings that were renamed or removed."""
        assert _table_rows() <= set(_env_vars(Settings))
