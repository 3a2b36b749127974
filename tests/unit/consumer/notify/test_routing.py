"""Routes and the per-sink rate limit."""

from __future__ import annotations

from consumer.notify.routing import RateLimiter, refusal
from consumer.notify_settings import NotifySinkSettings
from tests.notify_events import make_notice


class TestRefusal:
    def test_an_open_route_takes_everything(self) -> None:
        """The default route has no filter."""
        assert refusal(NotifySinkSettings(), make_notice(status="failed", confidence=0.0, count=1)) is None

    def test_each_rule_names_itself(self) -> None:
        """Server globs, tenants, statuses, confidence and count each refuse with their own reason."""
        route = NotifySinkSettings(servers=["checkout-*"], tenants=["acme"], statuses=["analyzed"],
                                   min_confidence=0.5, min_count=10)
        assert refusal(route, make_notice()) is None
        assert refusal(route, make_notice(server="payments")) == "server"
        assert refusal(route, make_notice(tenant="globex")) == "tenant"
        assert refusal(route, make_notice(status="recurrence")) == "status"
        assert refusal(route, make_notice(confidence=0.49)) == "confidence"
        assert refusal(route, make_notice(count=9)) == "count"


class TestRateLimiter:
    def test_no_limit_never_waits(self) -> None:
        """0 per minute means unlimited."""
        limiter = RateLimiter(0, 1)
        assert all(limiter.wait_s() == 0 for _ in range(100))

    def test_burst_then_the_rate(self) -> None:
        """Three go at once, the fourth waits one interval, and tokens come back with time."""
        now = [0.0]
        limiter = RateLimiter(60, 3, clock=lambda: now[0])
        assert [limiter.wait_s() for _ in range(3)] == [0, 0, 0]
        assert limiter.wait_s() == 1.0
        now[0] = 1.0
        assert limiter.wait_s() == 0
        now[0] = 100.0
        assert [limiter.wait_s() for _ in range(3)] == [0, 0, 0]  # never more than the burst saved up
        assert limiter.wait_s() > 0
