"""How a sink's HTTP exchange ends: the outcomes, the delivery error, and the status-code rules.

Every sink talks HTTP through one `httpx.AsyncClient`. What a response means is decided here once:
2xx is done; 429, 408 and 5xx are worth retrying (after `Retry-After` when the server sent one); any
other 4xx is permanent. A transport failure (refused, reset, timed out) is retried too, so a retried
operation must be safe to repeat: the issue sinks look up before they write for that reason.
"""

from __future__ import annotations

import email.utils
import enum
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx

from analysis.errors import LogAgentError

__all__ = ["DeliveryError", "Outcome", "check", "json_body", "new_client", "request", "retry_after_s"]

_DETAIL_CHARS = 300


class Outcome(enum.Enum):
    """What became of one analysis at one sink; each value is a metric label."""

    DELIVERED = "delivered"
    """The sink accepted it (a message posted, an issue opened or commented)."""
    DUPLICATE = "duplicate"
    """The sink already had it (a replay after a restart): nothing was sent twice."""
    SKIPPED = "skipped"
    """Not for this sink: its route refused it, or no target is configured for the server."""
    FAILED = "failed"
    """Given up (a permanent error, or retries ran out): it went to the DLQ with the reason."""


class DeliveryError(LogAgentError):
    """A delivery that did not go through. `reason` is a bounded code (a metric label and a DLQ header)."""

    def __init__(self, reason: str, detail: str, *, retriable: bool, retry_after: float | None = None) -> None:
        super().__init__(f"{reason}: {detail[:_DETAIL_CHARS]}")
        self.reason = reason
        self.retriable = retriable
        self.retry_after = retry_after


def retry_after_s(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asked us to wait (`Retry-After` as seconds or an HTTP date), or None."""
    value = headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def check(response: httpx.Response) -> httpx.Response:
    """`response` when it succeeded; otherwise a DeliveryError saying whether to retry."""
    status = response.status_code
    if status < 300:
        return response
    detail = f"HTTP {status} from {response.request.url.host}: {response.text[:_DETAIL_CHARS]}"
    if status == 429:
        raise DeliveryError("rate_limited", detail, retriable=True, retry_after=retry_after_s(response.headers))
    if status >= 500 or status == 408:
        raise DeliveryError("server_error", detail, retriable=True, retry_after=retry_after_s(response.headers))
    raise DeliveryError("rejected", detail, retriable=False)


def new_client(timeout_s: float, headers: Mapping[str, str] | None = None) -> httpx.AsyncClient:
    """One sink's connection pool; redirects are not followed (a moved API is a configuration error)."""
    return httpx.AsyncClient(timeout=timeout_s, headers=dict(headers or {}), follow_redirects=False)


Checker = Callable[[httpx.Response], httpx.Response]


async def request(send: Callable[..., Awaitable[httpx.Response]], *args: Any, checker: Checker = check,
                  **kwargs: Any) -> httpx.Response:
    """Call `send(*args, **kwargs)` (a client method) and judge the answer; transport errors are retriable."""
    try:
        response = await send(*args, **kwargs)
    except httpx.TransportError as exc:
        raise DeliveryError("transport", f"{type(exc).__name__}: {exc}", retriable=True) from exc
    return checker(response)


def json_body(response: httpx.Response) -> Any:
    """The decoded JSON answer; a 2xx that is not JSON (a proxy's page) is retried like a server error."""
    try:
        return response.json()
    except ValueError as exc:
        raise DeliveryError("bad_response", f"not JSON from {response.request.url.host}: {exc}",
                            retriable=True) from exc
