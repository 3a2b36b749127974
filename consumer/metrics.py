"""Prometheus metrics of the service, on an injected registry, with fixed and bounded labels.

Dashboards and alert rules depend on these names (DESIGN.md); renaming one is a contract change.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)
_INDEX_LAG_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 1800, 3600)


class Metrics:
    """Every metric the service exports. Label values come from closed sets, never from event data."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.consumer_lag = Gauge(
            "logagent_consumer_lag", "Messages behind the partition end offset.", ["topic", "partition"],
            registry=r,
        )
        self.events = Counter(
            "logagent_events_total", "Input messages by outcome (accepted, dlq).", ["outcome"], registry=r
        )
        self.dlq = Counter("logagent_dlq_total", "Messages sent to the DLQ by reason.", ["reason"], registry=r)
        self.open_bursts = Gauge("logagent_open_bursts", "Bursts currently open.", registry=r)
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
            "logagent_repo_sync_errors_total", "Failed fetches or checkouts of service repositories.", registry=r
        )
        self.ollama_up = Gauge("logagent_ollama_up", "1 when the Ollama circuit is closed.", registry=r)
        self.feedback = Counter(
            "logagent_feedback_total", "Feedback messages by outcome (applied, unknown, bad).", ["outcome"],
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
