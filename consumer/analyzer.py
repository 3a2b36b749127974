"""What the pipeline calls once per closed burst (`Analyzer`, implemented by `consumer.explainer`), and the
retries around it."""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from analysis.code.burst import burst_analysis
from analysis.errors import LogAgentError
from analysis.event import Cluster
from analysis.report import Analysis
from consumer.retry import Backoff, sleep_unless

__all__ = ["Analyzer", "analyze_or_fail", "failed_analysis"]

log = logging.getLogger(__name__)
_MAX_FAILURE_CHARS = 1000


class Analyzer(Protocol):
    """Turns one closed burst into its analysis; raise a retriable LogAgentError for transient faults."""

    async def analyze(self, cluster: Cluster) -> Analysis:
        """Analyse `cluster`."""
        ...


def failed_analysis(cluster: Cluster, reason: str) -> Analysis:
    """The event published for a burst that cannot be analysed, so its offsets can still move on; a person
    should look at it, so it is flagged for review (and goes to the review topic too)."""
    return burst_analysis(cluster, "failed", cluster.commit, failure_reason=reason[:_MAX_FAILURE_CHARS],
                          needs_review=True, review_reasons=["analysis failed"])


async def analyze_or_fail(
    analyzer: Analyzer, cluster: Cluster, backoff: Backoff, stop: asyncio.Event
) -> Analysis | None:
    """The burst's analysis; a `failed` one when an error is permanent or retries run out; None when
    `stop` is set while waiting to retry (the burst is then handed back, not lost)."""
    for attempt in range(1, backoff.attempts + 1):
        try:
            return await analyzer.analyze(cluster)
        except Exception as error:  # any analyzer fault is reported on the burst, never dropped
            retriable = isinstance(error, LogAgentError) and error.retriable
            reason = f"{type(error).__name__}: {error}"
            if not retriable:
                return failed_analysis(cluster, reason)
            if attempt == backoff.attempts:
                return failed_analysis(cluster, f"retries exhausted: {reason}")
            log.warning("analysis failed, retrying", extra={"fields": {
                "server": cluster.server_id, "attempt": attempt, "error": type(error).__name__}})
            if await sleep_unless(stop, backoff.delay(attempt)):
                return None
    return None  # only reached with attempts < 1
