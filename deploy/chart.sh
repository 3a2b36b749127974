#!/usr/bin/env bash
# `make chart`: package the Helm chart into dist/ (or $CHART_OUT). Refuses when the chart's version or
# appVersion is not the project's version (pyproject.toml), when its README is stale, or when it does
# not lint strictly, so a packaged chart always matches the image built from the same commit.
set -euo pipefail

cd "$(dirname "$0")/.."
CHART="${CHART_DIR:-deploy/helm/logagent}"
OUT="${CHART_OUT:-dist}"
HELM="${HELM:-.tools/bin/helm}"
if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi

"$PY" - "$CHART/Chart.yaml" <<'PYEOF'
import re, sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]["version"]
chart = open(sys.argv[1], encoding="utf-8").read()
found = {key: re.search(rf'^{key}:\s*"?([^"\s]+)"?\s*$', chart, re.MULTILINE) for key in ("version", "appVersion")}
for key, match in found.items():
    value = match.group(1) if match else None
    if value != project:
        sys.exit(f"chart: {sys.argv[1]} {key} is {value}, the project is {project} (pyproject.toml): set both alike")
PYEOF
"$PY" deploy/chart_readme.py --check
"$HELM" lint --strict "$CHART" >/dev/null
mkdir -p "$OUT"
"$HELM" package "$CHART" --destination "$OUT"
