"""Localisation on real bugs nobody here wrote: the Defects4J stack-trace corpus (`../shared/corpora/defects4j`).

Each of its 80 bugs (Math, JacksonDatabind, Closure) comes with the trace Defects4J recorded by running
the failing test, a tagged repository at the buggy revision, and the fix's files and lines. The localiser
is handed only what a user's service would send, the trace, logged in one of the shapes users send
(structured native frames, a logstash text trace, an ECS text trace), and the tree at the bug's tag; the
answer fields are read only to score. The naive rule, "blame the deepest in-app, non-test frame", runs on
the same events in the same run.

Tiers (from the corpus): `solid`, where every application frame's line matches the tree, and
`lines_shifted`, where the trace came from a slightly different build.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from analysis.code.filemap import FileIndex, is_generated_path, is_test_path
from analysis.code.localiser import localise
from analysis.code.repo import open_local
from analysis.code.tools import FileTools, ToolLimits
from analysis.event import Cluster
from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.signature import fingerprint_event
from bench.workload import encode

SHAPES = ("native", "logstash", "ecs")
TIERS = ("solid", "lines_shifted")
_FRAME = re.compile(r"^\s*at (?:[\w.]+/)?([\w$.<>]+)\.([\w$<>]+)\(([^)]*)\)\s*$")
_MORE = re.compile(r"^\s*\.\.\. (\d+) more")
_NOW = 1_700_000_000.0


@dataclass(frozen=True)
class Bug:
    """One corpus record, as much of it as the evaluation uses."""

    id: str
    project: str
    tier: str
    tag: str
    trace: str
    fixed: dict[str, tuple[int, ...]]
    """Fixed file → the lines the fix changes, numbered as in the tree at the tag (scoring only)."""
    frame_lines: dict[str, tuple[int, ...]]
    """Fixed file → the tree lines its trace frames ran (the corpus's check of the trace; scoring only)."""

    def best_trace_line(self) -> int | None:
        """The distance to a patched line of the best line any frame of the trace names in a fixed file."""
        found = [abs(a - b) for path, lines in self.frame_lines.items() for a in lines for b in self.fixed[path]]
        return min(found) if found else None


@dataclass(frozen=True)
class Score:
    """Where one analyzer put the blame for one bug in one event shape."""

    bug: str
    tier: str
    shape: str
    analyzer: str
    ranked: tuple[str, ...]
    """Distinct files, best first."""
    fixed: frozenset[str]
    line: int | None
    distance: int | None
    """|cited line - nearest patched line| when the first file is a fixed file."""

    @property
    def top1(self) -> bool:
        """The first file is one the fix changes."""
        return bool(self.ranked) and self.ranked[0] in self.fixed

    @property
    def top3(self) -> bool:
        """One of the first three files is one the fix changes."""
        return any(p in self.fixed for p in self.ranked[:3])


@dataclass(frozen=True)
class Summary:
    """One analyzer over one tier and shape."""

    cases: int
    top1: float
    top3: float
    exact: int
    median_distance: float | None
    right_file: int


@dataclass(frozen=True)
class Defects4jReport:
    """Every score, and what could not be run."""

    scores: list[Score]
    skipped: list[str]
    seconds: float = 0.0
    bound: dict[str, tuple[int, int, float | None]] = field(default_factory=dict)
    """Tier → (bugs where some trace line is a patched line, bugs with a frame in a fixed file, the median
    best distance): what citing the best of the trace's own lines would score."""

    def summary(self, tier: str, shape: str, analyzer: str) -> Summary:
        """Scores of one analyzer on one tier and shape."""
        mine = [s for s in self.scores if (s.tier, s.shape, s.analyzer) == (tier, shape, analyzer)]
        distances = [s.distance for s in mine if s.distance is not None]
        n = max(1, len(mine))
        return Summary(len(mine), sum(s.top1 for s in mine) / n, sum(s.top3 for s in mine) / n,
                       sum(d == 0 for d in distances), statistics.median(distances) if distances else None,
                       len(distances))


def load_bugs(corpus: Path) -> list[Bug]:
    """The corpus records."""
    bugs: list[Bug] = []
    for row in (corpus / "bugs.jsonl").read_text(encoding="utf-8").splitlines():
        if row.strip():
            rec = orjson.loads(row)
            fixed = {path: tuple(rec["patched_lines"].get(path, ())) for path in rec["fixed_files"]}
            ran: dict[str, list[int]] = {}
            for frame in rec.get("in_app_frames", ()):
                if frame["file"] in fixed and frame.get("line_in_tree"):
                    ran.setdefault(frame["file"], []).append(frame["line_in_tree"])
            lines = {path: tuple(found) for path, found in ran.items()}
            bugs.append(Bug(rec["id"], rec["project"], rec["tier"], rec["tag"], rec["stack_trace"], fixed, lines))
    return bugs


def evaluate(corpus: Path, shapes: Sequence[str] = SHAPES, only: str = "") -> Defects4jReport:
    """Clone each project's bundle into a temporary directory, analyse every bug in every shape."""
    started = time.monotonic()
    bugs = [b for b in load_bugs(corpus) if only in b.id]
    scores: list[Score] = []
    skipped: list[str] = []
    with tempfile.TemporaryDirectory(prefix="evals-defects4j-") as tmp:
        work = Path(tmp)
        clones: dict[str, Path] = {}
        for bug in bugs:
            if bug.project not in clones:
                clones[bug.project] = work / bug.project
                bundle = corpus / "repos" / f"{bug.project}.bundle"
                cloned = subprocess.run(["git", "clone", "-q", str(bundle), str(clones[bug.project])],
                                        capture_output=True, text=True, timeout=300, check=False)
                if cloned.returncode != 0:
                    skipped.append(f"{bug.project}: {bundle.name} could not be cloned ({cloned.stderr.strip()[:120]})")
            if not (clones[bug.project] / ".git").is_dir():
                continue
            checkout = open_local(clones[bug.project], bug.tag, cache_dir=work / "worktrees")
            tools = FileTools(checkout.root, ToolLimits(), repo_dir=checkout.repo_dir, commit=checkout.commit)
            index = FileIndex.build(checkout.root, tools.limits.skip_dirs)
            for shape in shapes:
                cluster = _cluster(record(bug, shape, checkout.commit))
                analysis = localise(cluster, checkout, tools)
                ranked = _distinct([*([analysis.culprit.path] if analysis.culprit else []),
                                    *(s.path for s in analysis.suspects)])
                line = analysis.culprit.line if analysis.culprit else None
                scores.append(_score(bug, shape, "localiser", ranked, line))
                naive = naive_rule(cluster, index)
                first = naive[0][1] if naive else None
                scores.append(_score(bug, shape, "naive", _distinct(p for p, _ in naive), first))
    return Defects4jReport(scores, skipped, time.monotonic() - started, line_bound(bugs))


def line_bound(bugs: Sequence[Bug]) -> dict[str, tuple[int, int, float | None]]:
    """Per tier, how close the best line the trace itself names comes to the fix (see `Defects4jReport`)."""
    out: dict[str, tuple[int, int, float | None]] = {}
    for tier in TIERS:
        best = [d for b in bugs if b.tier == tier and (d := b.best_trace_line()) is not None]
        out[tier] = (sum(d == 0 for d in best), len(best), statistics.median(best) if best else None)
    return out


def naive_rule(cluster: Cluster, index: FileIndex) -> list[tuple[str, int | None]]:
    """The root cause's in-app, non-test frames, deepest first: the naive answer is the first."""
    root = cluster.representative.root_cause
    found: list[tuple[str, int | None]] = []
    for frame in root.frames if root else ():
        match = index.locate(frame)
        if match and not is_test_path(match.path) and not is_generated_path(match.path):
            found.append((match.path, frame.lineno))
    return found


def _score(bug: Bug, shape: str, analyzer: str, ranked: Sequence[str], line: int | None) -> Score:
    distance = None
    if ranked and ranked[0] in bug.fixed and line is not None and bug.fixed[ranked[0]]:
        distance = min(abs(line - n) for n in bug.fixed[ranked[0]])
    return Score(bug.id, bug.tier, shape, analyzer, tuple(ranked), frozenset(bug.fixed), line, distance)


def _distinct(paths: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(p for p in paths if p))


def _cluster(raw: bytes) -> Cluster:
    event = decode_message(raw, DecodeConfig())[0]
    signature = fingerprint_event(event)
    return Cluster(server_id=event.server_id, tenant=event.tenant, fingerprint=signature.fingerprint,
                   exception_type=signature.exception_type or event.exception_type, first_seen=event.timestamp,
                   last_seen=event.timestamp, count=1, commits=(event.commit or "",), samples=(event,))


# -- the event shapes users send ----------------------------------------------------------------------


def record(bug: Bug, shape: str, commit: str) -> bytes:
    """The failure as a service would log it in `shape`, at the deployed commit."""
    head = bug.trace.splitlines()[0]
    exc_type, _, value = head.partition(": ")
    server = bug.project.lower()
    message = f"request failed: {value}"[:200]
    if shape == "native":
        doc: dict[str, Any] = {"server_id": server, "timestamp": _NOW, "level": "error", "message": message,
                               "commit": commit, "exception": native_exception(bug.trace)}
    else:
        doc = encode(shape, server=server, message=message, commit=commit, now=_NOW, exc_type=exc_type.strip(),
                     exc_value=value, trace=bug.trace)
    return orjson.dumps(doc)


def native_exception(trace: str) -> dict[str, Any]:
    """A JVM text trace as an SDK sends it: structured frames (outermost first) per exception, the causes
    under `chained`, each cause's `... N more` frames filled in from the exception it caused."""
    blocks: list[dict[str, Any]] = []
    for line in trace.splitlines():
        frame = _FRAME.match(line)
        more = _MORE.match(line)
        if frame and blocks:
            owner, function, where = frame.groups()
            filename, _, number = where.partition(":")
            entry: dict[str, Any] = {"module": owner, "function": function}
            if filename not in ("Native Method", "Unknown Source"):
                entry["filename"] = filename
            if number.isdigit():
                entry["lineno"] = int(number)
            blocks[-1]["frames"].append(entry)
        elif more and len(blocks) > 1:
            blocks[-1]["frames"] += blocks[-2]["frames"][-int(more.group(1)) :]
        elif line.startswith("Caused by: ") or not blocks:
            exc_type, _, value = line.removeprefix("Caused by: ").partition(": ")
            blocks.append({"type": exc_type.strip(), "value": value, "frames": []})
        elif not blocks[-1]["frames"] and line.strip():
            blocks[-1]["value"] += "\n" + line
    out = [{"type": b["type"], "value": b["value"], "stacktrace": b["frames"][::-1]} for b in blocks]
    return {**out[0], "chained": out[1:]} if len(out) > 1 else out[0]
