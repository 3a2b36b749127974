"""Localisation quality: does the analysis point at the file and line a developer would fix?

Every bug case is built as a real repository and run, so its trace is real. The heuristic localiser
and the LLM agent analyse it the way the service does (decode, fingerprint, checkout at the deployed
commit, file tools). The agent talks to the Ollama-protocol server through the real langchain-ollama
client, answered from the case's cassette, or through a recording proxy to a real Ollama (`live`).
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from analysis.agent.config import AgentConfig
from analysis.agent.loop import Agent
from analysis.code.filemap import FileIndex
from analysis.code.localiser import localise
from analysis.code.repo import Checkout, open_local
from analysis.code.tools import FileTools, ToolLimits
from analysis.event import Cluster
from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.redact import Redactor
from analysis.intake.signature import fingerprint_event
from analysis.report import Analysis
from evals.bugs import ALL_CASES, BugCase
from evals.bugs_elsewhere import ELSEWHERE_CASES
from evals.cassette import Cassette, RecordingProxy, load
from evals.defects4j import naive_rule
from evals.repos import BuiltCase, available, build
from tests.ollama_server import ScriptedOllama

SMALL_LANGUAGES = ("python", "node")  # no compiler start-up: the subset `make test` runs


@dataclass(frozen=True)
class Verdict:
    """How one analysis of one case scored."""

    case: str
    language: str
    kind: str
    analyzer: str
    top1: bool
    top3: bool
    line_distance: int | None
    """|culprit line - true line| when the culprit file is right."""
    predicted: str
    status: str
    notes: int
    """Notes on the analysis (dropped citations, limits hit)."""


@dataclass(frozen=True)
class Summary:
    """Scores of one analyzer over the cases it saw."""

    analyzer: str
    cases: int
    top1: float
    top3: float
    median_line_distance: float | None
    exact_lines: int


def judge(built: BuiltCase, analysis: Analysis, analyzer: str) -> Verdict:
    """Score `analysis` against the case's truth."""
    culprit = analysis.culprit
    paths = [culprit.path if culprit else "", *(s.path for s in analysis.suspects)]
    return judge_ranking(built, paths, culprit.line if culprit else None, analyzer, analysis.status,
                         len(analysis.notes))


def judge_ranking(built: BuiltCase, paths: Sequence[str], line: int | None, analyzer: str, status: str = "",
                  notes: int = 0) -> Verdict:
    """Score a ranking of files (best first) and the line cited in the first one."""
    ranked = list(dict.fromkeys(p for p in paths if p))
    truth = built.case.culprit_path
    top1 = bool(ranked) and ranked[0] == truth
    distance = abs(line - built.culprit_line) if top1 and line is not None else None
    predicted = f"{ranked[0]}:{line}" if ranked else "(none)"
    return Verdict(built.case.name, built.case.language, built.case.kind, analyzer, top1, truth in ranked[:3],
                   distance, predicted, status, notes)


def summarise(analyzer: str, verdicts: Sequence[Verdict], elsewhere: bool | None = False) -> Summary:
    """Accuracy and line distance of one analyzer, on the cases whose fix is in the trace (`elsewhere`
    False), on those where it is not (True), or on all (None)."""
    mine = [v for v in verdicts
            if v.analyzer == analyzer and (elsewhere is None or (v.kind == "not-in-trace") == elsewhere)]
    distances = [v.line_distance for v in mine if v.line_distance is not None]
    return Summary(
        analyzer, len(mine), sum(v.top1 for v in mine) / max(1, len(mine)),
        sum(v.top3 for v in mine) / max(1, len(mine)),
        statistics.median(distances) if distances else None, sum(d == 0 for d in distances),
    )


def cluster_of(built: BuiltCase) -> Cluster:
    """The one-event burst the service would hand to analysis for this case."""
    event = decode_message(built.event_json(), DecodeConfig())[0]
    signature = fingerprint_event(event)
    return Cluster(server_id=event.server_id, tenant=event.tenant, fingerprint=signature.fingerprint,
                   exception_type=signature.exception_type or event.exception_type, first_seen=event.timestamp,
                   last_seen=event.timestamp, count=1, commits=(built.commit,), samples=(event,))


def tools_for(checkout: Checkout) -> FileTools:
    """The file tools analysis reads the checkout with."""
    return FileTools(checkout.root, ToolLimits(), repo_dir=checkout.repo_dir, commit=checkout.commit)


def run_agent(built: BuiltCase, cluster: Cluster, checkout: Checkout, heuristic: Analysis,
              cassette: Cassette | None, live_url: str | None, model: str) -> tuple[Analysis, Cassette | None]:
    """The agent's analysis: replayed from `cassette`, or recorded from a real Ollama at `live_url`."""
    redactor = Redactor()
    if live_url:
        with RecordingProxy(live_url) as proxy:
            agent = Agent(AgentConfig(model=model), redactor, proxy.url)
            outcome = agent.analyze(cluster, checkout, tools_for(checkout), heuristic)
        return outcome.analysis, Cassette(built.case.name, model, "recorded from a live model", proxy.turns)
    if cassette is None:
        return heuristic, None
    with ScriptedOllama(cassette.replies()) as server:
        agent = Agent(AgentConfig(model=cassette.model), redactor, server.url)
        outcome = agent.analyze(cluster, checkout, tools_for(checkout), heuristic)
    return outcome.analysis, cassette


@dataclass(frozen=True)
class LocalisationReport:
    """Per-case verdicts, the languages skipped for lack of a runtime, and the cassettes (re)written."""

    verdicts: list[Verdict]
    skipped: list[str]
    recorded: list[Path]


def evaluate(small: bool = False, live_url: str | None = None, model: str = "qwen2.5-coder:7b",
             cases: Sequence[BugCase] = ALL_CASES + ELSEWHERE_CASES) -> LocalisationReport:
    """Build, run and analyse every case (Python and Node only when small). A case whose fix is not in the
    trace is analysed twice by the heuristic: with the history prior (the product's default) and without."""
    verdicts: list[Verdict] = []
    skipped: list[str] = []
    recorded: list[Path] = []
    uncassetted: list[str] = []
    with tempfile.TemporaryDirectory(prefix="evals-localisation-") as tmp:
        workdir = Path(tmp)
        for case in cases:
            if small and case.language not in SMALL_LANGUAGES:
                continue
            if not available(case.language):
                skipped.append(f"{case.name} ({case.language} not installed)")
                continue
            built = build(case, workdir)
            cluster = cluster_of(built)
            checkout = open_local(built.repo, built.commit, cache_dir=workdir / "worktrees")
            heuristic = localise(cluster, checkout, tools_for(checkout))
            verdicts.append(judge(built, heuristic, "heuristic"))
            naive = naive_rule(cluster, FileIndex.build(checkout.root, ToolLimits().skip_dirs))
            verdicts.append(judge_ranking(built, [p for p, _ in naive], naive[0][1] if naive else None, "naive"))
            if case.kind == "not-in-trace":
                blind = localise(cluster, checkout, tools_for(checkout), history=False)
                verdicts.append(judge(built, blind, "no-history"))
            analysis, cassette = run_agent(built, cluster, checkout, heuristic, load(case.name), live_url, model)
            if cassette is None:
                uncassetted.append(case.name)
                continue
            if live_url:
                recorded.append(cassette.save())
            verdicts.append(judge(built, analysis, "agent"))
    if uncassetted:
        skipped.append(f"the agent, on {len(uncassetted)} cases without a cassette: {', '.join(uncassetted)}")
    return LocalisationReport(verdicts, skipped, recorded)
