"""Every analysis of a burst carries the burst's own id and cluster block, however it was produced."""

from __future__ import annotations

import dataclasses

from analysis.code.burst import analysis_id, burst_analysis, burst_id
from analysis.event import Cluster, ErrorEvent
from analysis.report import Location

EVENT = ErrorEvent(server_id="shop", timestamp=10.0, message="KeyError: 'price'", tenant="acme")
CLUSTER = Cluster(server_id="shop", tenant="acme", fingerprint="f00d", exception_type="KeyError", first_seen=10.0,
                  last_seen=12.5, count=3, commits=("abc123",), samples=(EVENT,))


class TestBurstAnalysis:
    def test_the_id_is_the_bursts_and_a_replay_gets_the_same_one(self) -> None:
        """Deterministic in server, tenant, fingerprint and start: the same burst read again (a replay, more
        events) is the same analysis."""
        assert burst_id(CLUSTER) == analysis_id("shop", "acme", "f00d", 10.0) == burst_id(
            dataclasses.replace(CLUSTER, count=9))
        assert burst_id(CLUSTER) != analysis_id("shop", "acme", "f00d", 10.5)

    def test_two_tenants_bursts_of_one_failure_in_the_same_second_are_two_analyses(self) -> None:
        """Otherwise the second tenant's case would not be stored, and a verdict on it would judge the
        first tenant's case (ids are how verdicts find cases)."""
        assert burst_id(CLUSTER) != burst_id(dataclasses.replace(CLUSTER, tenant="globex"))

    def test_the_report_names_the_burst_and_takes_the_given_fields(self) -> None:
        """Id, cluster block, status and commit from the burst; the heuristic analyzer unless told otherwise."""
        analysis = burst_analysis(CLUSTER, "heuristic", CLUSTER.commit, root_cause="price missing",
                                  culprit=Location(path="shop.py", line=7, function="total"))
        assert (analysis.analysis_id, analysis.status, analysis.analyzer, analysis.commit) == (
            burst_id(CLUSTER), "heuristic", "heuristic", "abc123")
        assert analysis.cluster.server == "shop" and analysis.cluster.count == 3
        assert analysis.cluster.sample_messages == ["KeyError: 'price'"]
        assert analysis.culprit is not None and analysis.culprit.line == 7
        assert burst_analysis(CLUSTER, "analyzed", None, analyzer="llm").analyzer == "llm"
