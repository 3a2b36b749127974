"""Analysis events as the analysing service publishes them, built through the real report model and
CloudEvent encoder, for the `logagent notify` tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from analysis.code.burst import analysis_id
from analysis.report import Analysis, ClusterInfo, Fix, Location, PastCaseRef
from consumer.cloudevent import to_cloudevent
from consumer.notify.notice import Notice, parse_notice

T0 = 1_717_243_000.0
COMMIT = "8d64db8cfd7d94f657446221beb0d96a7cbad642"


def make_analysis(server: str = "checkout-service", fingerprint: str = "fp-quantity", *, first_seen: float = T0,
                  count: int = 42, status: str = "analyzed", confidence: float = 0.8, tenant: str = "acme",
                  commit: str = COMMIT, **fields: Any) -> Analysis:
    """One analysis of a burst; the id is the service's own, deterministic from server, fingerprint, start."""
    doc: dict[str, Any] = {
        "analysis_id": analysis_id(server, tenant, fingerprint, first_seen), "status": status,
        "analyzer": {"analyzed": "llm", "recurrence": "memory"}.get(status, "heuristic"),
        "model": "qwen2.5-coder:7b" if status == "analyzed" else "",
        "cluster": ClusterInfo(server=server, tenant=tenant, fingerprint=fingerprint,
                               exception_type="java.lang.NumberFormatException", first_seen=first_seen,
                               last_seen=first_seen + 95.0, count=count,
                               sample_messages=['For input string: "4 5"']),
        "commit": commit,
        "root_cause": 'Integer.parseInt gets the raw quantity "4 5" with an inner space.',
        "culprit": Location(path="src/main/java/com/acme/checkout/web/QuantityParser.java", line=6,
                            function="parse"),
        "fix": Fix(path="src/main/java/com/acme/checkout/web/QuantityParser.java",
                   before="return Integer.parseInt(raw.trim());",
                   after='return Integer.parseInt(raw.replace(" ", ""));',
                   explanation="Strip inner whitespace before parsing."),
        "confidence": confidence,
        "past_cases": [PastCaseRef(memory_id="e75231f8-aaaa-bbbb-cccc-000000000001", score=0.88, stale=False)],
    }
    if status == "failed":
        doc.update(root_cause="", culprit=None, fix=None, failure_reason="ollama unreachable")
    doc.update(fields)
    return Analysis.model_validate(doc)


def event_bytes(analysis: Analysis, source: str = "logagent/logagent") -> bytes:
    """The CloudEvent the service publishes for `analysis`."""
    return to_cloudevent(analysis, source, now=datetime(2024, 6, 1, 12, 0, tzinfo=UTC))


def make_notice(**fields: Any) -> Notice:
    """What `logagent notify` reads from the event of `make_analysis(**fields)`."""
    notice = parse_notice(event_bytes(make_analysis(**fields)))
    assert notice is not None
    return notice
