"""The package layout's one-way import rule, checked on the source (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.paths import PROJECT_ROOT

# Which top-level packages each package may import. The CLI's `demo` subcommand is the one place the
# service reaches the demo, inside that command's function (never at module level).
_ALLOWED = {
    "consumer": {"consumer", "analysis", "store"},
    "analysis": {"analysis"},
    "store": {"store"},
    "demo": {"demo", "consumer", "analysis", "store"},
}
_PROJECT_PACKAGES = set(_ALLOWED) | {"bench", "evals", "tests"}


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(top-level package, at module level) of every project import in `path`."""
    tree = ast.parse(path.read_text(), str(path))
    module_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            top = name.partition(".")[0]
            if top in _PROJECT_PACKAGES:
                found.append((top, id(node) in module_level))
    return found


def _modules(package: str) -> list[Path]:
    return sorted((PROJECT_ROOT / package).rglob("*.py"))


class TestImportRule:
    @pytest.mark.parametrize("package", sorted(_ALLOWED))
    def test_imports_point_one_way(self, package: str) -> None:
        """consumer → analysis, store; analysis and store import neither each other nor the service."""
        wrong = [
            f"{path.relative_to(PROJECT_ROOT)} imports {top}"
            for path in _modules(package)
            for top, at_module_level in _imports(path)
            if top not in _ALLOWED[package]
            and not (package == "consumer" and top == "demo" and not at_module_level
                     and path.name == "service.py" and path.parent.name == "cli")
        ]
        assert not wrong, wrong

    def test_the_rule_catches_a_forbidden_import(self, tmp_path: Path) -> None:
        """The checker sees imports inside functions too (so the test above can fail)."""
        module = tmp_path / "m.py"
        module.write_text("import store\n\ndef f():\n    from consumer.settings import Settings\n")
        assert _imports(module) == [("store", True), ("consumer", False)]
