"""Run streams: iterate a run's events; reconnect with Last-Event-ID when the connection drops."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

import httpx

from .._calls import Call, decode_json
from .._errors import ProtocolError, RateLimited, ServerError, TransportError
from .._policy import RETRY_STATUSES
from .._sse import SSE_HEADERS
from .._streams import StreamEvent, StreamResume
from ._event_stream import AsyncEventStream, sse_events
from ._http import AsyncHTTP, _sleep


class AsyncRunStream(AsyncEventStream[StreamEvent]):
    """The events of one run, each delivered exactly once, until `end`/`error` or run end.

    Iterate it (`async for event in stream`); use it as a context manager, or call
    `aclose()`, to stop early. When the connection drops (or closes while the run still runs)
    it reconnects to the run's join stream with `Last-Event-ID` and skips replayed events it
    already delivered. Only runs created with `stream_resumable=True` have event ids; others
    resume with live events only.
    """

    _resume: StreamResume

    def __init__(
        self,
        http: AsyncHTTP,
        call: Call[Any],
        *,
        thread_id: str | None,
        last_event_id: str | None = None,
    ) -> None:
        self._http = http
        self._call = call
        self._resume = StreamResume(
            base_url=http.client.base_url,
            thread_id=thread_id,
            last_event_id=last_event_id,
            max_reconnects=http.stream_reconnects,
            backoff=http.policy.backoff,
            max_backoff=http.policy.max_backoff,
        )
        self._events = self._iterate()

    @property
    def run_id(self) -> str | None:
        """The run's id, once the server has told it (headers or the `metadata` event)."""
        return self._resume.run_id

    @property
    def thread_id(self) -> str | None:
        """The run's thread id, when known."""
        return self._resume.thread_id

    @property
    def last_event_id(self) -> str | None:
        """The id of the last event received; pass it to `join_stream` to resume later."""
        return self._resume.last_event_id

    async def collect(self) -> list[StreamEvent]:
        """Read the stream to its end and return all events."""
        events: list[StreamEvent] = []
        async for event in self:
            events.append(event)
        return events

    async def _iterate(self) -> AsyncGenerator[StreamEvent, None]:
        resume = self._resume
        headers = {**SSE_HEADERS, **(self._call.headers or {})}
        started = False  # the first request was answered with a stream

        def opened(response: httpx.Response) -> None:
            nonlocal started
            resume.on_response(response)
            started = True

        open_attempt = 0
        while True:
            call = self._next_call(started, headers)
            cause: Exception | None = None
            try:
                client = self._http.client
                raws = sse_events(client, call.build(client), opened=opened)
                async with aclosing(raws):
                    async for raw in raws:
                        if (event := resume.accept(raw)) is not None:
                            yield event
                        if resume.ended:
                            return
            except (httpx.TransportError, RateLimited, ServerError, ProtocolError) as exc:
                if not started:
                    await _sleep(self._open_retry_delay(call, exc, open_attempt))
                    open_attempt += 1
                    continue
                cause = exc  # a cut, or a restarting server refuses, answers 5xx/429, non-SSE
            if resume.ended:
                return
            if cause is None:
                if resume.reconnect_url is None:
                    return  # nothing to check or rejoin: the stream is simply over
                cause = await self._check_run()
                if cause is None:
                    return
            if resume.reconnect_url is None:
                raise TransportError(f"stream broke and has no reconnect target: {cause}")
            await _sleep(resume.next_delay(cause))

    def _next_call(self, started: bool, headers: dict[str, str]) -> Call[Any]:
        """The first request as given, then GETs of the reconnect URL."""
        resume = self._resume
        if started and resume.reconnect_url is not None:
            return Call(
                "GET", resume.reconnect_url, decode_json, headers=resume.reconnect_headers(headers)
            )
        return dataclasses.replace(self._call, headers=resume.reconnect_headers(headers))

    def _open_retry_delay(self, call: Call[Any], exc: Exception, attempt: int) -> float:
        """Wait before retrying the first request, or raise if that is not safe."""
        policy = self._http.policy
        if isinstance(exc, httpx.TransportError):
            delay = None
            if policy.should_retry_error(exc, idempotent=call.safe_to_repeat):
                delay = policy.retry_delay(attempt)
            if delay is None:
                raise TransportError(f"{call.method} {call.path}: {exc}") from exc
            return delay
        if isinstance(exc, RateLimited | ServerError) and call.safe_to_repeat:
            if exc.status in RETRY_STATUSES and (delay := policy.retry_delay(attempt)) is not None:
                hint = exc.retry_after if isinstance(exc, RateLimited) else None
                return delay if hint is None else min(hint, policy.max_retry_after)
        raise exc

    async def _check_run(self) -> Exception | None:
        """After a clean close without `end`: is the run still going (then reconnect)?"""
        run_url = self._resume.run_url()
        if run_url is None:
            return None
        try:
            run = await self._http.client.get(run_url, headers={"Accept": "application/json"})
        except httpx.TransportError as exc:
            return exc  # the restart that closed the stream can fail the check too
        if run.status_code == 429 or run.status_code >= 500:
            return TransportError(f"run check answered {run.status_code}")
        if run.status_code >= 400:
            return None
        try:
            status = decode_json(run).get("status")
        except (ProtocolError, AttributeError):
            return None
        if status in ("pending", "running"):
            return TransportError("stream closed while the run was still running")
        return None
