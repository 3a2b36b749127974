"""Metrics of `logagent notify`, on their own registry: the notify pod exports only these.

Labels come from closed sets: `sink` is one of slack, webhook, github, gitlab; `outcome` an `Outcome`;
`reason` a delivery error's code. Never an analysis id, a server or a URL.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

from consumer.notify.transport import Outcome

__all__ = ["NotifyMetrics"]

_DELIVERY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)


class NotifyMetrics:
    """Deliveries by sink and outcome, their latency, retries, DLQ records and consumer lag."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # as the service's (consumer.metrics)
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.deliveries = Counter(
            "logagent_notify_deliveries_total", "Analyses handled per sink, by outcome "
            "(delivered, duplicate, skipped, failed).", ["sink", "outcome"], registry=r)
        self.delivery_seconds = Histogram(
            "logagent_notify_delivery_seconds", "Time from reading an analysis to its outcome at a sink, "
            "retries and rate-limit waits included.", ["sink"], buckets=_DELIVERY_BUCKETS, registry=r)
        self.retries = Counter(
            "logagent_notify_retries_total", "Retried delivery attempts per sink, by reason "
            "(rate_limited, server_error, transport, bad_response).", ["sink", "reason"], registry=r)
        self.dlq = Counter(
            "logagent_notify_dlq_total", "Given-up deliveries sent to the notify DLQ, by sink and reason.",
            ["sink", "reason"], registry=r)
        self.consumer_lag = Gauge(
            "logagent_notify_consumer_lag", "Analyses behind the end of the topic, per sink and partition.",
            ["sink", "partition"], registry=r)

    def prepare(self, sink: str) -> None:
        """Create the sink's series at zero, so rates exist before the first delivery."""
        for outcome in Outcome:
            self.deliveries.labels(sink, outcome.value)
        self.delivery_seconds.labels(sink)
