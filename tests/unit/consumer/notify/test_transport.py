"""What an HTTP answer means for a delivery: done, retry (after how long), or give up."""

from __future__ import annotations

import time
from email.utils import formatdate

import httpx
import pytest

from consumer.notify.github import github_check
from consumer.notify.transport import DeliveryError, check, retry_after_s


def _response(status: int, headers: dict[str, str] | None = None, text: str = "") -> httpx.Response:
    return httpx.Response(status, headers=headers, text=text, request=httpx.Request("POST", "https://h.example/x"))


class TestCheck:
    def test_2xx_is_done(self) -> None:
        """200, 201 and 204 pass through."""
        for status in (200, 201, 204):
            assert check(_response(status)).status_code == status

    @pytest.mark.parametrize(("status", "reason"), [(429, "rate_limited"), (500, "server_error"),
                                                    (503, "server_error"), (408, "server_error")])
    def test_rate_limits_and_server_errors_are_retried(self, status: int, reason: str) -> None:
        """429, 408 and 5xx are retriable, and carry the server's Retry-After."""
        with pytest.raises(DeliveryError) as caught:
            check(_response(status, {"retry-after": "7"}))
        assert (caught.value.retriable, caught.value.reason, caught.value.retry_after) == (True, reason, 7.0)

    @pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 422])
    def test_other_client_errors_are_permanent(self, status: int) -> None:
        """Any other 4xx will not heal by retrying."""
        with pytest.raises(DeliveryError) as caught:
            check(_response(status, text="channel_not_found"))
        assert not caught.value.retriable and "channel_not_found" in str(caught.value)


class TestRetryAfter:
    def test_seconds_and_http_dates(self) -> None:
        """Both forms of the header; garbage is ignored."""
        assert retry_after_s({"retry-after": "30"}) == 30.0
        now = time.time()
        assert 58 <= (retry_after_s({"retry-after": formatdate(now + 60, usegmt=True)}, now=now) or 0) <= 61
        assert retry_after_s({"retry-after": "soon"}) is None
        assert retry_after_s({}) is None


class TestGitHubRateLimits:
    def test_secondary_limit_403_waits_for_retry_after(self) -> None:
        """GitHub's 403 with retry-after is a rate limit, not a permission error."""
        with pytest.raises(DeliveryError) as caught:
            github_check(_response(403, {"retry-after": "60"}))
        assert caught.value.retriable and caught.value.retry_after == 60.0

    def test_primary_limit_waits_until_the_reset(self) -> None:
        """403 with x-ratelimit-remaining 0 waits until x-ratelimit-reset."""
        reset = str(int(time.time()) + 120)
        with pytest.raises(DeliveryError) as caught:
            github_check(_response(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset}))
        assert caught.value.retriable and 110 <= (caught.value.retry_after or 0) <= 121

    def test_a_plain_403_is_permanent(self) -> None:
        """Without rate-limit headers a 403 means no access."""
        with pytest.raises(DeliveryError) as caught:
            github_check(_response(403, {"x-ratelimit-remaining": "4999"}, text="Resource not accessible"))
        assert not caught.value.retriable
