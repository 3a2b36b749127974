"""A burst that cannot be analysed is still published, and flagged for a person to look at."""

from __future__ import annotations

import asyncio

from analysis.event import Cluster, ErrorEvent
from consumer.analyzer import analyze_or_fail
from consumer.retry import Backoff

EVENT = ErrorEvent(server_id="shop", timestamp=10.0, message="KeyError: 'price'", tenant="acme")
CLUSTER = Cluster(server_id="shop", tenant="acme", fingerprint="f00d", exception_type="KeyError", first_seen=10.0,
                  last_seen=12.5, count=3, commits=("abc123",), samples=(EVENT,))


class _Broken:
    async def analyze(self, cluster: Cluster) -> None:
        raise ValueError("the repository is unreadable")


class TestFailedAnalysis:
    def test_a_failed_analysis_goes_to_review_with_its_reason(self) -> None:
        """Published as `failed` with the error, and `needs_review`, so it also reaches the review topic."""
        analysis = asyncio.run(analyze_or_fail(_Broken(), CLUSTER, Backoff(0.0, 0.0, attempts=1),  # type: ignore[arg-type]
                                               asyncio.Event()))
        assert analysis is not None and analysis.status == "failed"
        assert analysis.failure_reason == "ValueError: the repository is unreadable"
        assert analysis.needs_review and analysis.review_reasons == ["analysis failed"]
