"""The benches' stand-in for the service's per-message path closes quiet bursts as the service does."""

from __future__ import annotations

import pytest

from bench.intake import Intake
from bench.workload import WorkloadSpec, stream

pytestmark = pytest.mark.integration


def test_with_expiry_a_long_stream_keeps_only_its_live_bursts_open() -> None:
    """Ten minutes of stream (30 s quiet time): most bursts close on the way, their samples built, and none
    is lost; without expiry nothing closes."""
    spec = WorkloadSpec(events=6_000, mean_gap_s=0.1)
    expiring, holding = Intake(expire_every=500), Intake()
    for event in stream(spec):
        expiring.add(event.line)
        holding.add(event.line)

    assert expiring.rejected == holding.rejected == 0
    assert holding.closed == 0
    assert expiring.closed > 2 * expiring.window.open_count
    assert expiring.closed + expiring.window.open_count >= holding.window.open_count
