"""Which analyses a sink takes (its route) and how fast it may take them (a token bucket)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from consumer.notify.notice import Notice
from consumer.notify_settings import NotifySinkSettings

__all__ = ["RateLimiter", "refusal"]


def refusal(route: NotifySinkSettings, notice: Notice) -> str | None:
    """Why `route` does not take `notice` (a short reason for the log), or None when it does."""
    if route.servers and not any(fnmatchcase(notice.server, pattern) for pattern in route.servers):
        return "server"
    if route.tenants and notice.cluster.tenant not in route.tenants:
        return "tenant"
    if notice.status not in route.statuses:
        return "status"
    if notice.confidence < route.min_confidence:
        return "confidence"
    if notice.cluster.count < route.min_count:
        return "count"
    return None


@dataclass
class RateLimiter:
    """A token bucket: `burst` deliveries at once, then `per_minute`; 0 means no limit. Clock injected."""

    per_minute: float
    burst: int
    clock: Callable[[], float] = field(default=time.monotonic)
    _tokens: float = field(init=False)
    _updated: float = field(init=False)

    def __post_init__(self) -> None:
        self._tokens = float(self.burst)
        self._updated = self.clock()

    def wait_s(self) -> float:
        """Seconds until a delivery may go; 0 takes a token now."""
        if self.per_minute <= 0:
            return 0.0
        now = self.clock()
        rate = self.per_minute / 60.0
        self._tokens = min(float(self.burst), self._tokens + (now - self._updated) * rate)
        self._updated = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / rate

    def give_back(self) -> None:
        """Return a token taken for something that then did not happen."""
        self._tokens = min(float(self.burst), self._tokens + 1.0)
