"""Prometheus metrics of the service, on an injected registry, with fixed and bounded labels.

Dashboards and alert rules depend on these names (DESIGN.md); renaming one is a contract change.
Counters export no `_created` series: they would double every counter for nothing alert rules use.
"""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

__all__ = ["Metrics", "build_info"]

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)
_INDEX_LAG_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 1800, 3600)


class Metrics:
    """Every metric the service exports. Label values come from closed sets, never from event data."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped; process-wide and idempotent
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        partition = ["consumergroup", "topic", "partition"]
        self.consumer_lag = Gauge(
            "logagent_consumer_lag",
            "Messages between the group's committed offset and the partition end, as kafka-exporter and "
            "Burrow measure it (includes what open bursts hold back).",
            partition, registry=r,
        )
        self.position_lag = Gauge(
            "logagent_consumer_position_lag", "Messages between this consumer's fetch position and the partition end.",
            partition, registry=r,
        )
        self.last_commit = Gauge(
            "logagent_last_commit_timestamp_seconds",
            "When offsets were last committed (process start until the first commit).", registry=r,
        )
        self.last_commit.set_to_current_time()
        self.events = Counter(
            "logagent_events_total", "Input messages by outcome (accepted, dlq).", ["outcome"], registry=r
        )
        self.dlq = Counter(
            "logagent_dlq_total", "Records sent to the DLQ by reason: input that cannot be read (not_json, too_large, "
            "...; docs/runbook.md), or analysis_too_large (an analysis event no cut of which fits the output topic).",
            ["reason"], registry=r,
        )
        self.open_bursts = Gauge("logagent_open_bursts", "Bursts currently open (events far out of order can keep one "
                                 "burst in several pieces until an event bridges them).", registry=r)
        self.bursts_closed = Counter(
            "logagent_bursts_closed_total",
            "Bursts closed, by why (quiet, max_length, evicted, flush, rebalance).",
            ["reason"],
            registry=r,
        )
        self.inflight = Gauge("logagent_inflight_analyses", "Closed bursts queued or being analysed.", registry=r)
        self.paused = Gauge("logagent_consumer_paused", "1 while fetching is paused for backpressure.", registry=r)
        self.analyses = Counter(
            "logagent_analyses_total", "Published analyses by status and analyzer.", ["status", "analyzer"],
            registry=r,
        )
        self.analysis_seconds = Histogram(
            "logagent_analysis_seconds", "Time to analyse one burst.", buckets=_LATENCY_BUCKETS, registry=r
        )
        self.llm_seconds = Histogram(
            "logagent_llm_seconds", "Time of one LLM request.", buckets=_LATENCY_BUCKETS, registry=r
        )
        self.llm_tokens = Counter(
            "logagent_llm_tokens_total", "LLM tokens by kind (prompt, completion).", ["kind"], registry=r
        )
        self.llm_calls_avoided = Counter(
            "logagent_llm_calls_avoided_total", "Bursts answered from memory without an LLM call.", registry=r
        )
        self.tool_calls = Counter(
            "logagent_tool_calls_total", "Agent tool calls by tool and outcome.", ["tool", "outcome"],
            registry=r,
        )
        self.memory_queries = Counter("logagent_memory_queries_total", "Memory recalls.", registry=r)
        self.memory_hits = Counter(
            "logagent_memory_hits_total", "Memory recalls that returned at least one case.", registry=r
        )
        self.index_lag = Histogram(
            "logagent_index_lag_seconds",
            "Time until a new analysis is recallable (memory) or a new commit is local (repo).",
            ["index"],
            buckets=_INDEX_LAG_BUCKETS,
            registry=r,
        )
        self.citations = Counter(
            "logagent_citations_total", "Citations checked, by kind (analysis, memory).", ["kind"], registry=r
        )
        self.stale_citations = Counter(
            "logagent_stale_citations_total", "Citations found stale, by kind.", ["kind"], registry=r
        )
        self.stale_citation_ratio = Gauge(
            "logagent_stale_citation_ratio", "Stale citations over all citations since start.", registry=r
        )
        self.repo_sync_errors = Counter(
            "logagent_repo_sync_errors_total",
            "Repository faults by reason (not_configured, timeout, auth, not_found, unreachable, no_commits, "
            "other); each burst they hit is analysed from its trace alone.",
            ["reason"], registry=r,
        )
        self.ollama_up = Gauge("logagent_ollama_up", "1 when the Ollama circuit is closed.", registry=r)
        self.heuristic_mode = Gauge(
            "logagent_heuristic_mode", "1 when no LLM is configured: every analysis is heuristic by choice.",
            registry=r,
        )
        self.degraded = Gauge(
            "logagent_degraded",
            "1 while the replica serves in a lesser mode, by reason (ollama_unreachable: heuristic answers).",
            ["reason"], registry=r,
        )
        self.build_info = Gauge(
            "logagent_build_info", "Always 1; the labels name the running build.", ["version", "commit"],
            registry=r,
        )
        self.feedback = Counter(
            "logagent_feedback_total", "Feedback messages by outcome (applied, duplicate, unknown, bad).", ["outcome"],
            registry=r,
        )
        self.published = Counter(
            "logagent_published_total", "Events published, by topic kind (analysis, review, dlq).", ["kind"],
            registry=r,
        )
        for kind in ("analysis", "memory"):
            self.citations.labels(kind)
            self.stale_citations.labels(kind)
        for index in ("memory", "repo"):
            self.index_lag.labels(index)
        for kind in ("analysis", "review", "dlq"):
            self.published.labels(kind)  # present at 0, so "consuming but publishing nothing" can be seen
        self.degraded.labels("ollama_unreachable")
        self._citations_seen = 0.0
        self._stale_seen = 0.0

    def count_citations(self, kind: str, total: int, stale: int) -> None:
        """Record checked citations and keep the derived ratio current."""
        self.citations.labels(kind).inc(total)
        self.stale_citations.labels(kind).inc(stale)
        self._citations_seen += total
        self._stale_seen += stale
        if self._citations_seen:
            self.stale_citation_ratio.set(self._stale_seen / self._citations_seen)


def build_info() -> tuple[str, str]:
    """(version, commit) of the running code: the installed package's version; the commit from the
    `commit.txt` an image build writes, else the source checkout's HEAD, else "unknown"."""
    try:
        version = metadata.version("log-agent")
    except metadata.PackageNotFoundError:
        version = "unknown"
    stamped = Path(__file__).with_name("commit.txt")
    if stamped.is_file():
        return version, stamped.read_text(encoding="utf-8").strip() or "unknown"
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=Path(__file__).parent,
                              capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return version, "unknown"
    return version, head.stdout.strip() if head.returncode == 0 and head.stdout.strip() else "unknown"
