"""Retry policy, without I/O: which failures to retry, and how long to wait.

A request is retried only when repeating it cannot do harm:
- a connection that was never established (nothing was sent) is retried for every request;
- other network failures and the statuses 429, 502, 503 and 504 are retried only for
  requests marked idempotent: GET, PUT, DELETE and read-like POSTs (search, count, history).
  Creating a run is never repeated blindly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

RETRY_STATUSES = frozenset({429, 502, 503, 504})

# Connection-level failures where the request never reached the server.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently to retry.

    `max_retries` extra attempts after the first; waits grow as `backoff * 2**n` up to
    `max_backoff` seconds (plus up to 25 % jitter). A 429/503 `Retry-After` header replaces
    the computed wait, capped at `max_retry_after` (a longer hint raises instead).
    """

    max_retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 8.0
    max_retry_after: float = 60.0

    def should_retry_error(self, exc: httpx.TransportError, *, idempotent: bool) -> bool:
        """Whether a network failure may be retried for this request."""
        if isinstance(exc, httpx.UnsupportedProtocol):
            return False  # a bad URL does not get better by waiting
        return idempotent or isinstance(exc, _NOT_SENT)

    def retry_delay(self, attempt: int, response: httpx.Response | None = None) -> float | None:
        """Wait before retry number `attempt` (0-based); None means give up now."""
        if attempt >= self.max_retries:
            return None
        if response is not None and (hint := retry_after(response)) is not None:
            return hint if hint <= self.max_retry_after else None
        return backoff_delay(attempt, base=self.backoff, cap=self.max_backoff)


def backoff_delay(attempt: int, *, base: float, cap: float) -> float:
    """Exponential backoff for attempt `attempt` (0-based), capped, with 0-25 % jitter."""
    delay = min(cap, base * (2.0**attempt))
    return delay + random.uniform(0, delay * 0.25)


def retry_after(response: httpx.Response) -> float | None:
    """The `Retry-After` header in seconds (delta-seconds or an HTTP date), if present."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
