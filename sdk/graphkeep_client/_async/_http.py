"""Sends calls with retries and backoff (the only place that waits between attempts)."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

import httpx

from .._calls import Call, raise_for_status
from .._errors import TransportError
from .._policy import RETRY_STATUSES, RetryPolicy
from .._streams import same_origin

T = TypeVar("T")


async def _sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


class _BodyCut(Exception):
    """The answer's headers arrived but its body broke off; re-read it from `location`."""

    def __init__(self, location: str, cause: httpx.TransportError) -> None:
        super().__init__(str(cause))
        self.location = location
        self.cause = cause


class AsyncHTTP:
    """Executes `Call`s on an httpx client, applying the retry policy."""

    def __init__(
        self, client: httpx.AsyncClient, policy: RetryPolicy, *, stream_reconnects: int
    ) -> None:
        self.client = client
        self.policy = policy
        self.stream_reconnects = stream_reconnects

    async def call(self, call: Call[T]) -> T:
        """Send the call and parse its answer."""
        return call.parse(await self.send(call))

    async def send(self, call: Call[Any]) -> httpx.Response:
        """Send the call (retrying what is safe to retry); the body is read in full."""
        attempt = 0
        current = call
        while True:
            try:
                response = await self._send_once(current)
            except _BodyCut as cut:
                # The run exists and the server named its join URL: waiting there is safe.
                current = Call(
                    "GET", cut.location, call.parse, headers=call.headers, follow_location=True
                )
                delay = self.policy.retry_delay(attempt)
                if delay is None:
                    raise _transport_error(current, cut.cause) from cut.cause
            except httpx.TransportError as exc:
                delay = None
                if self.policy.should_retry_error(exc, idempotent=current.safe_to_repeat):
                    delay = self.policy.retry_delay(attempt)
                if delay is None:
                    raise _transport_error(current, exc) from exc
            else:
                delay = None
                if response.status_code in RETRY_STATUSES and current.safe_to_repeat:
                    delay = self.policy.retry_delay(attempt, response)
                if delay is None:
                    raise_for_status(response)
                    return response
            await _sleep(delay)
            attempt += 1

    async def _send_once(self, call: Call[Any]) -> httpx.Response:
        response = await self.client.send(call.build(self.client), stream=True)
        try:
            await response.aread()
        except httpx.TransportError as exc:
            location = response.headers.get("location")
            if call.follow_location and location and response.status_code < 400:
                raise _BodyCut(same_origin(self.client.base_url, location), exc) from exc
            raise
        finally:
            await response.aclose()
        return response


def _transport_error(call: Call[Any], exc: httpx.TransportError) -> TransportError:
    return TransportError(f"{call.method} {call.path}: {type(exc).__name__}: {exc}")
