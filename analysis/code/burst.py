"""A burst's identity and its view in the report: the deterministic analysis id (a replay gets the same
one), the cluster block with sample and exception messages, and the analysis built around both."""

from __future__ import annotations

import uuid
from typing import Any

from analysis.event import Cluster
from analysis.intake.tally import count_messages
from analysis.report import Analysis, ClusterInfo, ExceptionMessage, Status

__all__ = ["analysis_id", "burst_analysis", "burst_id", "cluster_info"]

_NAMESPACE = uuid.UUID("6f0b7a52-3c1e-5d4b-9a8e-2b1f0c9d7e61")
_MAX_SAMPLE_MESSAGES = 5
_MAX_MESSAGE_CHARS = 300


def analysis_id(server: str, tenant: str, fingerprint: str, first_seen: float) -> str:
    """Deterministic id of the analysis of one burst, so a replayed burst gets the same id. The tenant is
    part of it: two tenants' bursts of one failure starting in the same second are two cases, and a
    verdict on one (by id) never reaches the other."""
    return str(uuid.uuid5(_NAMESPACE, f"{server}\x1f{tenant}\x1f{fingerprint}\x1f{first_seen!r}"))


def burst_id(cluster: Cluster) -> str:
    """The analysis id of `cluster`'s burst."""
    return analysis_id(cluster.server_id, cluster.tenant, cluster.fingerprint, cluster.first_seen)


def burst_analysis(cluster: Cluster, status: Status, commit: str | None, **fields: Any) -> Analysis:
    """The heuristic analyzer's `Analysis` of `cluster` (unless `fields` names another): its burst's id and
    cluster block, `status`, `commit`, and the other fields of the report from `fields`."""
    return Analysis(**{"analyzer": "heuristic", **fields}, analysis_id=burst_id(cluster), status=status,
                    cluster=cluster_info(cluster), commit=commit)


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
