"""The chart's README, generated from values.yaml: every value with its type, default and the `# --` comment
above it (the helm-docs convention the chart follows).

    python deploy/chart_readme.py           # rewrite deploy/helm/logagent/README.md
    python deploy/chart_readme.py --check   # exit 1 when the committed README differs (make chart runs it)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parent / "helm" / "logagent"
README = CHART / "README.md"
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z][\w.-]*):(?:\s|$)")
_DOC = re.compile(r"^ *# -- ?(?P<text>.*)$")
_MORE = re.compile(r"^ *# ?(?P<text>.*)$")
_HEADER = """# Log Agent Helm chart

Deploys Log Agent: it reads error logs from Kafka, groups each burst of the same failure, analyses it
against the service's source at the deployed commit and publishes one analysis event per burst.

```sh
helm install logagent deploy/helm/logagent --set kafka.bootstrapServers=kafka:9092
helm test logagent        # every replica answers /readyz and serves /metrics
make chart                # packages it into dist/, its version checked against pyproject.toml
```

Alerts link their section of `docs/runbook.md` (set `prometheusRule.runbookBaseUrl` to where you publish
it). Values are checked by `values.schema.json`; combinations it cannot express by `templates/validate.yaml`.

<!-- Generated from values.yaml by deploy/chart_readme.py; a test fails while this table is stale. -->

## Values

| Key | Type | Default | Description |
|---|---|---|---|
"""


def documented_keys(text: str) -> list[tuple[str, str]]:
    """(dotted key, description) for every key of values.yaml that has a `# --` comment, in file order."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[int, str]] = []
    description: list[str] | None = None
    for line in text.splitlines():
        doc = _DOC.match(line)
        if doc:
            description = [doc.group("text").strip()]
            continue
        key = _KEY.match(line)
        if key:
            indent = len(key.group("indent"))
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, key.group("key")))
            if description is not None:
                found.append((".".join(name for _, name in stack), " ".join(description).strip()))
            description = None
            continue
        more = _MORE.match(line)
        if more and description is not None:
            description.append(more.group("text").strip())
        elif not line.strip():
            description = None
    return found


def _value(values: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        values = values[part]
    return values


def _type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "int" if isinstance(value, int) else "float"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "list"
    return "string"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(text: str) -> str:
    """The README for the values.yaml `text`: one row per documented leaf (groups are named by their rows)."""
    values = yaml.safe_load(text)
    keys = documented_keys(text)
    parents = {dotted.rsplit(".", 1)[0] for dotted, _ in keys if "." in dotted}
    rows = []
    for dotted, description in keys:
        value = _value(values, dotted)
        if dotted in parents and isinstance(value, dict) and value:
            continue  # a group: its members have rows of their own
        default = json.dumps(value, sort_keys=True)
        rows.append(f"| `{dotted}` | {_type(value)} | `{_cell(default)}` | {_cell(description)} |")
    return _HEADER + "\n".join(rows) + "\n"


def main(argv: list[str]) -> int:
    expected = render((CHART / "values.yaml").read_text(encoding="utf-8"))
    if "--check" in argv:
        if README.read_text(encoding="utf-8") != expected:
            print(f"{README} is stale: run `python deploy/chart_readme.py`", file=sys.stderr)
            return 1
        return 0
    README.write_text(expected, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
