"""A circuit breaker around the LLM: after repeated failures, analyses go heuristic until a probe succeeds."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum


class CircuitState(Enum):
    """Where the breaker stands."""

    CLOSED = "closed"
    """The LLM is used for every analysis."""
    OPEN = "open"
    """The LLM is skipped; analyses are heuristic until `reset_after_s` has passed."""
    HALF_OPEN = "half_open"
    """One probe request is let through; its outcome closes or re-opens the circuit."""


@dataclass
class CircuitBreaker:
    """Counts consecutive LLM failures; pure state machine, the clock is injected."""

    failure_threshold: int = 3
    reset_after_s: float = 30.0
    clock: Callable[[], float] = field(default=time.monotonic)
    state: CircuitState = CircuitState.CLOSED
    _failures: int = 0
    _opened_at: float = 0.0
    _probing: bool = False

    def allow(self) -> bool:
        """Whether this analysis may call the LLM now."""
        if self.state is CircuitState.OPEN and self.clock() - self._opened_at >= self.reset_after_s:
            self.state = CircuitState.HALF_OPEN
            self._probing = False
        if self.state is CircuitState.HALF_OPEN:
            if self._probing:
                return False
            self._probing = True
            return True
        return self.state is CircuitState.CLOSED

    def record_success(self) -> None:
        """A request reached the LLM and got an answer: close the circuit."""
        self.state = CircuitState.CLOSED
        self._failures = 0
        self._probing = False

    def record_failure(self) -> None:
        """The LLM was unreachable or timed out: count it, and open the circuit past the threshold."""
        self._failures += 1
        if self.state is CircuitState.HALF_OPEN or self._failures >= self.failure_threshold:
            self.state = CircuitState.OPEN
            self._opened_at = self.clock()
            self._probing = False

    def abandon(self) -> None:
        """A call let through ended without telling whether the LLM is up (a bug of ours, not Ollama's): the
        next call may probe again instead of the circuit waiting for an answer that will never come."""
        self._probing = False

    @property
    def closed(self) -> bool:
        """True while the LLM is considered reachable."""
        return self.state is CircuitState.CLOSED
