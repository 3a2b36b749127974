"""Mixed-field shapes: real traces sent the ways producers really mix the four conventions' fields, through
`logagent fingerprint` and `logagent analyze` as a user runs them.

The traces are Defects4J's (real Java test failures, read from a checkout, default
`../shared/corpora/defects4j`). Each is wrapped in every layout of `LAYOUTS`: the canonical ECS document,
then the cases fields used to be lost in (a logback document with a nested custom `service` object, a
native event with a text `stack_trace`, a trace logged as the message, an event naming no server, ...).
All lines go through one `logagent fingerprint` process; each event goes through `logagent analyze
--offline` against the bug's source tree. A layout passes for a bug when its fingerprint and frames equal
the canonical layout's and the analysis names the same culprit file. The bundles are cloned into a
temporary directory that is removed afterwards.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

Layout = Callable[[str, str], dict[str, Any]]


def _otel(server: str, trace: str) -> dict[str, Any]:
    def attribute(key: str, value: str) -> dict[str, Any]:
        return {"key": key, "value": {"stringValue": value}}

    record = {"timeUnixNano": "1714644843551000000", "severityText": "ERROR",
              "body": {"stringValue": "test failed"}, "attributes": [attribute("exception.stacktrace", trace)]}
    resource = {"attributes": [attribute("service.name", server)]}
    return {"resourceLogs": [{"resource": resource, "scopeLogs": [{"logRecords": [record]}]}]}


LAYOUTS: dict[str, Layout] = {
    "ecs (canonical)": lambda server, trace: {
        "@timestamp": "2024-05-02T10:14:03Z", "log.level": "ERROR", "service.name": server, "message": "test failed",
        "error.stack_trace": trace},
    "ecs nested": lambda server, trace: {
        "@timestamp": "2024-05-02T10:14:03Z", "log": {"level": "ERROR"}, "service": {"name": server},
        "message": "test failed", "error": {"stack_trace": trace}},
    "logback, nested custom service": lambda server, trace: {
        "@timestamp": "2024-05-02T10:14:03Z", "@version": "1", "logger_name": "test", "level": "ERROR",
        "message": "test failed", "stack_trace": trace, "service": {"name": server, "env": "ci"}},
    "native + text stack_trace": lambda server, trace: {
        "server_id": server, "timestamp": 1714644843.0, "level": "error", "message": "test failed",
        "stack_trace": trace},
    "native + exception as text": lambda server, trace: {
        "server_id": server, "timestamp": 1714644843.0, "message": "test failed", "exception": trace},
    "trace in the message": lambda server, trace: {"server_id": server, "message": trace},
    "otel": _otel,
    "no server (analyze: repo name)": lambda server, trace: {
        "@timestamp": "2024-05-02T10:14:03Z", "message": "test failed", "stack_trace": trace},
}  # fmt: skip
CANONICAL = "ecs (canonical)"
NO_SERVER = "no server (analyze: repo name)"


@dataclass(frozen=True)
class LayoutScore:
    """Per layout: bugs whose fingerprint, analysis and culprit agree with the canonical layout's."""

    layout: str
    bugs: int
    same_fingerprint: int
    analysed: int
    same_culprit: int
    culprit_in_fix: int


def evaluate(root: Path, limit: int | None = None) -> list[LayoutScore]:
    """Every bug of `root/bugs.jsonl` (the first `limit`) in every layout, through the real CLI."""
    bugs = [orjson.loads(line) for line in (root / "bugs.jsonl").read_bytes().splitlines() if line.strip()]
    bugs = bugs[:limit] if limit else bugs
    lines = [orjson.dumps(layout(bug["project"], bug["stack_trace"])) for bug in bugs for layout in LAYOUTS.values()]
    prints = _fingerprint_cli(lines)
    names = list(LAYOUTS)
    culprits: dict[tuple[int, str], str | None] = {}
    with tempfile.TemporaryDirectory(prefix="logagent-eval-") as scratch:
        clones: dict[str, Path] = {}
        for index, bug in enumerate(bugs):
            repo = clones.get(bug["project"])
            if repo is None:
                repo = clones[bug["project"]] = Path(scratch) / bug["project"]
                _git("clone", "-q", str(root / "repos" / f"{bug['project']}.bundle"), str(repo))
            _git("-C", str(repo), "checkout", "-q", "--detach", bug["tag"])
            for offset, name in enumerate(names):
                culprits[index, name] = _analyze_cli(lines[index * len(names) + offset], repo, Path(scratch))
    scores = []
    for offset, name in enumerate(names):
        same_print = analysed = same_culprit = in_fix = 0
        for index, bug in enumerate(bugs):
            canonical = prints[index * len(names)]
            mine = prints[index * len(names) + offset]
            expected_error = name == NO_SERVER and mine.get("error") == "missing_server"
            same_print += expected_error or (mine.get("fingerprint") == canonical.get("fingerprint")
                                             and mine.get("frames") == canonical.get("frames"))
            culprit = culprits[index, name]
            analysed += culprit is not None
            same_culprit += culprit is not None and culprit == culprits[index, CANONICAL]
            in_fix += culprit in bug["fixed_files"]
        scores.append(LayoutScore(name, len(bugs), same_print, analysed, same_culprit, in_fix))
    return scores


def _fingerprint_cli(lines: list[bytes]) -> list[dict[str, Any]]:
    """One `logagent fingerprint` process over every line: one output line per input line."""
    proc = subprocess.run([sys.executable, "-m", "consumer.cli", "fingerprint", "-"], input=b"\n".join(lines) + b"\n",
                          capture_output=True, check=True, timeout=600)  # fmt: skip
    return [orjson.loads(line) for line in proc.stdout.splitlines()]


def _analyze_cli(event: bytes, repo: Path, scratch: Path) -> str | None:
    """`logagent analyze --repo REPO --event FILE --offline`, run in process; the culprit's path or None."""
    from consumer.cli import main

    path = scratch / "event.json"
    path.write_bytes(event)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["analyze", "--repo", str(repo), "--event", str(path), "--offline"])
    if code != 0:
        return None
    culprit = orjson.loads(out.getvalue()).get("culprit")
    return culprit.get("path") if culprit else None


def _git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True, timeout=300)
