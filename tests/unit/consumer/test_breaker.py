"""The LLM circuit breaker."""

from __future__ import annotations

from consumer.breaker import CircuitBreaker, CircuitState


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class TestCircuitBreaker:
    def test_stays_closed_below_threshold(self) -> None:
        """Fewer consecutive failures than the threshold keep the LLM in use."""
        breaker = CircuitBreaker(failure_threshold=3, clock=_Clock())
        breaker.record_failure()
        breaker.record_failure()
        assert breaker.allow()
        assert breaker.state is CircuitState.CLOSED

    def test_opens_at_threshold_and_blocks(self) -> None:
        """At the threshold the circuit opens and analyses stop calling the LLM."""
        breaker = CircuitBreaker(failure_threshold=2, clock=_Clock())
        breaker.record_failure()
        breaker.record_failure()
        assert breaker.state is CircuitState.OPEN
        assert not breaker.allow()

    def test_success_resets_the_count(self) -> None:
        """A success in between means failures are no longer consecutive."""
        breaker = CircuitBreaker(failure_threshold=2, clock=_Clock())
        breaker.record_failure()
        breaker.record_success()
        breaker.record_failure()
        assert breaker.state is CircuitState.CLOSED

    def test_half_open_lets_one_probe_through(self) -> None:
        """After the reset time exactly one probe may go; others still go heuristic."""
        clock = _Clock()
        breaker = CircuitBreaker(failure_threshold=1, reset_after_s=10, clock=clock)
        breaker.record_failure()
        clock.now = 10.0
        assert breaker.allow()
        assert not breaker.allow()
        assert breaker.state is CircuitState.HALF_OPEN

    def test_probe_success_closes(self) -> None:
        """A successful probe brings the LLM back for every analysis."""
        clock = _Clock()
        breaker = CircuitBreaker(failure_threshold=1, reset_after_s=5, clock=clock)
        breaker.record_failure()
        clock.now = 6.0
        assert breaker.allow()
        breaker.record_success()
        assert breaker.closed and breaker.allow() and breaker.allow()

    def test_probe_failure_reopens(self) -> None:
        """A failed probe opens the circuit for another full reset period."""
        clock = _Clock()
        breaker = CircuitBreaker(failure_threshold=1, reset_after_s=5, clock=clock)
        breaker.record_failure()
        clock.now = 6.0
        assert breaker.allow()
        breaker.record_failure()
        assert breaker.state is CircuitState.OPEN
        clock.now = 10.0
        assert not breaker.allow()
        clock.now = 11.0
        assert breaker.allow()

    def test_an_abandoned_probe_lets_the_next_call_probe(self) -> None:
        """Third attacker review: a probe that raised something other than an LLM failure (an answer nested
        too deeply to parse) left the circuit waiting for its outcome for good."""
        clock = _Clock()
        breaker = CircuitBreaker(failure_threshold=1, reset_after_s=5, clock=clock)
        breaker.record_failure()
        clock.now = 6.0
        assert breaker.allow() and not breaker.allow()
        breaker.abandon()
        assert breaker.allow()
        breaker.record_success()
        assert breaker.closed
