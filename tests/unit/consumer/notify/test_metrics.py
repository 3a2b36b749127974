"""The notify pod's metrics export no `_created` series, as the service's do (README), in a process of their own."""

from __future__ import annotations

import subprocess
import sys

_SCRAPE = """
from prometheus_client import generate_latest
from consumer.notify.metrics import NotifyMetrics
metrics = NotifyMetrics()
metrics.deliveries.labels("webhook", "delivered").inc()
metrics.delivery_seconds.labels("webhook").observe(0.2)
print(generate_latest(metrics.registry).decode())
"""


def test_counters_export_no_created_series() -> None:
    """In its own interpreter: the service's metrics, which also turn `_created` off, are not imported there."""
    scraped = subprocess.run([sys.executable, "-c", _SCRAPE], capture_output=True, text=True, check=True,
                             timeout=120).stdout
    assert 'logagent_notify_deliveries_total{outcome="delivered",sink="webhook"} 1.0' in scraped
    assert "_created" not in scraped
