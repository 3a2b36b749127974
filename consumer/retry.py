"""The one retry policy of the service: capped exponential backoff with full jitter, cut short by shutdown.

The delays are tenacity's `wait_random_exponential` (a wait drawn uniformly between 0 and
`min(max_s, initial_s * 2**(attempt - 1))`), the same strategy `store.table.with_retries` uses for commit
races, so every caller in the project backs off alike. Callers loop themselves because each decides
differently what a failure means (a `failed` event, a heuristic fallback, a redelivered verdict); this
module gives them the delays and the interruptible wait (worker threads wait on a `threading.Event`).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from tenacity import RetryCallState, Retrying, wait_random_exponential

__all__ = ["Backoff", "sleep_unless"]


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff with full jitter, over at most `attempts` tries."""

    initial_s: float
    max_s: float
    attempts: int
    _wait: wait_random_exponential = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_wait", wait_random_exponential(multiplier=self.initial_s, max=self.max_s))

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed try number `attempt` (1-based)."""
        # Full jitter: workers hitting the same outage do not retry in lockstep.
        state = RetryCallState(_RETRYING, fn=None, args=(), kwargs={})
        state.attempt_number = attempt
        return float(self._wait(state))


_RETRYING = Retrying()  # only to build the call state tenacity's wait strategies read


async def sleep_unless(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep `seconds`; True when `stop` was set meanwhile (the caller then gives up)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    return stop.is_set()
