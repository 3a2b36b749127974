"""The small evaluation subset: grouping and localisation quality must not fall below what was measured.

Thresholds sit just under the figures measured when they were set (docs/evaluation.md), so a change
that makes grouping or localisation worse fails here.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from analysis.code.localiser import localise
from analysis.code.repo import open_local
from evals import grouping, localisation
from evals.bugs import PY_CASES
from evals.cassette import load
from evals.repos import build
from tests.ollama_server import ScriptedOllama


@pytest.fixture(scope="module")
def grouping_report() -> grouping.GroupingReport:
    return grouping.evaluate(small=True)


@pytest.fixture(scope="module")
def localisation_report() -> localisation.LocalisationReport:
    return localisation.evaluate(small=True)


class TestPairScore:
    def test_counts_pairs_put_together_and_pairs_that_belong_together(self) -> None:
        """Two right pairs, one wrong merge, one missed pair give precision 2/3 and recall 2/3."""
        score = grouping.score(["a", "a", "b", "c", "c"], ["x", "x", "x", "y", "z"])
        assert (score.true_pos, score.false_pos, score.false_neg) == (1, 2, 1)
        assert score.precision == pytest.approx(1 / 3)
        assert score.recall == pytest.approx(1 / 2)


class TestGroupingQuality:
    def test_same_failure_seen_differently_stays_one_group(self, grouping_report: grouping.GroupingReport) -> None:
        """Ids, line shifts, proxies, lambdas, venv paths and input shapes do not split a failure."""
        assert grouping_report.overall.recall >= 0.95, grouping_report.split

    def test_look_alike_failures_stay_apart(self, grouping_report: grouping.GroupingReport) -> None:
        """Different failures that share a type, wrapper or message shape are not merged (1.00 measured;
        runtime-only traces such as Node's ECONNREFUSED and ETIMEDOUT are told apart by their message)."""
        assert grouping_report.overall.precision >= 0.95, grouping_report.merged

    def test_every_language_is_grouped_without_splits(self, grouping_report: grouping.GroupingReport) -> None:
        """Each language of the corpus reaches full recall on its own."""
        recall = {name: s.recall for name, s in grouping_report.by_language.items()}
        assert recall == dict.fromkeys(("go", "java", "message", "node", "python"), 1.0)


class TestLocalisationQuality:
    def test_heuristic_puts_the_culprit_file_in_its_top_three(
        self, localisation_report: localisation.LocalisationReport
    ) -> None:
        """On real Python and Node traces the file to fix is among the heuristic's first three files."""
        summary = localisation.summarise("heuristic", localisation_report.verdicts)
        assert summary.cases == 8
        assert summary.top3 >= 0.85

    def test_heuristic_names_the_culprit_file_first(
        self, localisation_report: localisation.LocalisationReport
    ) -> None:
        """Top-1 file accuracy stays at the measured 87.5% (7 of 8: the miss is a caller reading a field
        the object lacks, which the trace cannot show)."""
        summary = localisation.summarise("heuristic", localisation_report.verdicts)
        assert summary.top1 >= 0.87
        assert summary.median_line_distance == 0

    def test_fix_outside_the_trace_is_in_the_top_three_without_history(
        self, localisation_report: localisation.LocalisationReport
    ) -> None:
        """Ten real Python and Node bugs whose fixed file no frame names: found from the code read at the
        failing line, the message and the constant at fault, with the history prior left out (measured 10/10)."""
        summary = localisation.summarise("no-history", localisation_report.verdicts, elsewhere=True)
        assert summary.cases == 10
        assert summary.top3 >= 0.9

    def test_agent_replayed_from_cassettes_validates_and_scores(
        self, localisation_report: localisation.LocalisationReport
    ) -> None:
        """Every replayed answer passes validation (status analyzed) and the agent finds 7 of 8 files."""
        agent = [v for v in localisation_report.verdicts if v.analyzer == "agent"]
        assert [v.status for v in agent] == ["analyzed"] * 8
        assert localisation.summarise("agent", agent).top1 >= 0.85


class TestLiveRecording:
    def test_recording_proxy_turns_a_model_run_into_a_replayable_cassette(self) -> None:
        """A run recorded through the proxy replays to the same culprit as the live run."""
        case = PY_CASES[0]
        seed = load(case.name)
        assert seed is not None
        with tempfile.TemporaryDirectory() as tmp, ScriptedOllama(seed.replies()) as upstream:
            built = build(case, Path(tmp))
            cluster = localisation.cluster_of(built)
            checkout = open_local(built.repo, built.commit, cache_dir=Path(tmp) / "worktrees")
            heuristic = localise(cluster, checkout, localisation.tools_for(checkout))
            live, recorded = localisation.run_agent(built, cluster, checkout, heuristic, None, upstream.url, "m")
            assert recorded is not None
            replayed, _ = localisation.run_agent(built, cluster, checkout, heuristic, recorded, None, "m")
        assert [t.get("tool_calls") is not None for t in recorded.turns] == [True, True, False]
        assert live.culprit == replayed.culprit
        assert live.culprit is not None and live.culprit.path == case.culprit_path
