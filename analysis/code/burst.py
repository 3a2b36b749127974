"""A burst's identity and its view in the report: the deterministic analysis id (a replay gets the same
one) and the cluster block with sample and exception messages."""

from __future__ import annotations

import uuid

from analysis.event import Cluster
from analysis.intake.tally import count_messages
from analysis.report import ClusterInfo, ExceptionMessage

__all__ = ["analysis_id", "cluster_info"]

_NAMESPACE = uuid.UUID("6f0b7a52-3c1e-5d4b-9a8e-2b1f0c9d7e61")
_MAX_SAMPLE_MESSAGES = 5
_MAX_MESSAGE_CHARS = 300


def analysis_id(server: str, fingerprint: str, first_seen: float) -> str:
    """Deterministic id of the analysis of one burst, so a replayed burst gets the same id."""
    return str(uuid.uuid5(_NAMESPACE, f"{server}\x1f{fingerprint}\x1f{first_seen!r}"))


def cluster_info(cluster: Cluster) -> ClusterInfo:
    """The report's view of a burst, with the first few sample messages and its distinct exception
    messages (counted by the window, else over the samples)."""
    messages: list[str] = []
    for sample in cluster.samples:
        text = sample.message[:_MAX_MESSAGE_CHARS]
        if text and text not in messages:
            messages.append(text)
        if len(messages) >= _MAX_SAMPLE_MESSAGES:
            break
    return ClusterInfo(
        server=cluster.server_id,
        tenant=cluster.tenant,
        fingerprint=cluster.fingerprint,
        exception_type=cluster.exception_type,
        first_seen=cluster.first_seen,
        last_seen=cluster.last_seen,
        count=max(cluster.count, 1),
        sample_messages=messages,
        exception_messages=[ExceptionMessage(message=m.message, count=m.count, example=m.example)
                            for m in cluster.messages or count_messages(cluster.samples)],
    )
