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
from analysis.code.localiser import localise
from analysis.code.repo import Checkout, open_local
from analysis.code.tools import FileTools, ToolLimits
from analysis.event import Cluster
from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.redact import Redactor
from analysis.intake.signature import fingerprint_event
from analysis.report import Analysis
from evals.bugs import ALL_CASES, BugCase
from evals.cassette import Cassette, RecordingProxy, load
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
    ranked: list[str] = []
    culprit = analysis.culprit
    for path in [culprit.path if culprit else "", *(s.path for s in analysis.suspects)]:
        if path and path not in ranked:
            ranked.append(path)
    truth = built.case.culprit_path
    top1 = bool(ranked) and ranked[0] == truth
    distance = None
    if top1 and culprit is not None and culprit.line is not None:
        distance = abs(culprit.line - built.culprit_line)
    predicted = f"{culprit.path}:{culprit.line}" if culprit else "(none)"
    return Verdict(built.case.name, built.case.language, built.case.kind, analyzer, top1, truth in ranked[:3],
                   distance, predicted, analysis.status, len(analysis.notes))


def summarise(analyzer: str, verdicts: Sequence[Verdict]) -> Summary:
    """Accuracy and line distance of one analyzer."""
    mine = [v for v in verdicts if v.analyzer == analyzer]
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
             cases: Sequence[BugCase] = ALL_CASES) -> LocalisationReport:
    """Build, run and analyse every case (Python and Node only when small)."""
    verdicts: list[Verdict] = []
    skipped: list[str] = []
    recorded: list[Path] = []
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
            analysis, cassette = run_agent(built, cluster, checkout, heuristic, load(case.name), live_url, model)
            if cassette is None:
                skipped.append(f"{case.name} (no cassette for the agent)")
                continue
            if live_url:
                recorded.append(cassette.save())
            verdicts.append(judge(built, analysis, "agent"))
    return LocalisationReport(verdicts, skipped, recorded)
