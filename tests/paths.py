"""Where the tests find the project and their fixtures, wherever in the tree a test module sits."""

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
TRACES = PROJECT_ROOT / "tests" / "fixtures" / "traces"
