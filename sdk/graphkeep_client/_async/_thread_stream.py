"""`client.threads.stream(...)`: one thread's event stream session (the thread-stream
protocol, docs/thread-stream-protocol.md), shaped like the official client's: `run.start`,
`run.respond`, `values`, `output`, `interrupted` / `interrupts`, `events` and `subscribe`.

Each subscription owns one connection (SSE by default, or a WebSocket) and pulls from it in
the caller's loop (no background task, so the sync twin is the same code). A dropped or
closed connection is reopened with `since` = the highest seq delivered, and replayed events
are skipped by `event_id`: every event once. A cursor older than what the server keeps
raises ResumeGap.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing
from typing import Any, Literal

import httpx

from .._calls import decode_json, raise_for_status, seg
from .._errors import (
    ProtocolError,
    RateLimited,
    RunFailed,
    ServerError,
    ThreadStreamError,
    error_class_for,
)
from .._sse import SSE_HEADERS
from .._thread_protocol import (
    ALL_CHANNELS,
    Cursor,
    command_result,
    gap_from,
    is_root,
    websocket_url,
)
from ._closing import AsyncClosing
from ._event_stream import AsyncEventStream, sse_events
from ._http import AsyncHTTP, _sleep
from ._runs import AsyncRuns

Transport = Literal["sse", "websocket"]
_HANDSHAKE_DROP = frozenset({"host", "accept", "accept-encoding", "connection", "content-length"})


class _Dropped(Exception):
    """The connection ended or broke; reconnect with the cursor."""


class AsyncThreadEvents(AsyncEventStream[dict[str, Any]]):
    """One subscription's events (dicts: the protocol's event envelopes), each once, until
    closed; reconnects with `since` when its connection drops."""

    _resume: Cursor

    def __init__(
        self, owner: AsyncThreadStream, subscription: dict[str, Any], since: int | None
    ) -> None:
        self._owner = owner
        self._subscription = subscription
        http = owner._http
        self._resume = Cursor(
            since,
            max_reconnects=http.stream_reconnects,
            backoff=min(http.policy.backoff, 0.1),
            max_backoff=http.policy.max_backoff,
        )
        self._events = self._iterate()

    @property
    def since(self) -> int | None:
        """The highest seq delivered so far (the cursor a reconnect sends)."""
        return self._resume.since

    async def _iterate(self) -> AsyncGenerator[dict[str, Any], None]:
        owner = self._owner
        while True:
            try:
                frames = self._websocket() if owner.transport == "websocket" else self._sse()
                async with aclosing(frames):
                    async for envelope in frames:
                        if self._resume.accept(envelope):
                            owner._observe(envelope)
                            yield envelope
                cause: Exception = _Dropped("the server ended the stream")
            except (httpx.TransportError, RateLimited, ServerError, _Dropped, OSError) as exc:
                cause = exc  # a restarting server refuses, answers 5xx/429 or cuts the link
            await _sleep(self._resume.next_delay(cause))

    async def _sse(self) -> AsyncGenerator[Any, None]:
        client = self._owner._http.client
        request = client.build_request(
            "POST",
            self._owner._path("stream/events"),
            json=self._resume.body(self._subscription),
            headers={**SSE_HEADERS, **self._owner._headers},
        )
        async with aclosing(sse_events(client, request, refused=_raise_gap)) as raws:
            async for raw in raws:
                gap = gap_from(raw.data)
                if gap is not None:
                    raise gap
                yield raw.data

    async def _websocket(self) -> AsyncGenerator[Any, None]:
        # optional dependency: `pip install graphkeep-client[websocket]`
        import websockets.exceptions as ws_errors
        from websockets.asyncio.client import connect

        owner = self._owner
        url = websocket_url(owner._http.client.base_url, owner._path("stream/events"))
        headers = await owner._handshake_headers(url)
        resuming = self._resume.since is not None
        method = "subscription.reconnect" if resuming else "subscription.subscribe"
        try:
            async with connect(url, additional_headers=headers, open_timeout=10) as ws:
                body = self._resume.body(self._subscription)
                await ws.send(json.dumps({"id": 1, "method": method, "params": body}))
                async for frame in ws:
                    envelope = json.loads(frame)
                    if isinstance(envelope, Mapping) and envelope.get("type") == "error":
                        if envelope.get("id") in (1, None):
                            command_result(envelope)  # raises it (gap, bad filter)
                    yield envelope
        except ws_errors.InvalidStatus as exc:
            status = exc.response.status_code
            raise error_class_for(status)(status, f"websocket upgrade refused: {status}") from exc
        except ws_errors.ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd is not None else 1006
            if 4400 <= code < 4500 and code not in (4408, 4429):
                status = code - 4000
                reason = exc.rcvd.reason if exc.rcvd is not None else ""
                raise error_class_for(status)(status, reason or f"closed {code}") from exc
            raise _Dropped(f"websocket closed {code}") from exc
        raise _Dropped("websocket closed")


def _raise_gap(response: httpx.Response) -> None:
    """A 410 that describes a resume gap raises it (its body is the error envelope)."""
    if response.status_code != 410:
        return
    try:
        gap = gap_from(decode_json(response))
    except ProtocolError:
        return
    if gap is not None:
        raise gap


class AsyncThreadRun:
    """`thread.run`: start a run on the thread, answer its interrupts."""

    def __init__(self, owner: AsyncThreadStream) -> None:
        self._owner = owner

    async def start(
        self,
        *,
        input: Any = None,
        config: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        multitask_strategy: str | None = None,
    ) -> dict[str, Any]:
        """`run.start`; returns `{"run_id": ...}` once the run exists (the thread is created
        on first use). `input` on an interrupted thread resumes it, as the server decides."""
        params: dict[str, Any] = {"assistant_id": self._owner.assistant_id}
        for key, value in (
            ("input", input),
            ("config", config),
            ("metadata", metadata),
            ("multitaskStrategy", multitask_strategy),
        ):
            if value is not None:
                params[key] = value
        result = await self._owner._command("run.start", params)
        self._owner._awaited_run = str(result.get("run_id") or "") or None
        return result

    async def respond(self, response: Any, *, interrupt_id: str | None = None) -> dict[str, Any]:
        """`input.respond` to the one outstanding interrupt (or the one named)."""
        owner = self._owner
        pending = [i for i in owner.interrupts if interrupt_id in (None, i["interrupt_id"])]
        if len(pending) != 1:
            raise ThreadStreamError(
                "no_such_interrupt",
                f"{len(pending)} outstanding interrupts match; pass interrupt_id",
            )
        chosen = pending[0]
        params = {
            "interrupt_id": chosen["interrupt_id"],
            "namespace": chosen["namespace"],
            "response": response,
        }
        result = await owner._command("input.respond", params)
        owner.interrupts = [i for i in owner.interrupts if i is not chosen]
        owner.interrupted = bool(owner.interrupts)
        # the resume run's id is not returned: it is the thread's newest run now
        latest = await owner._runs.list(owner.thread_id, limit=1)
        owner._awaited_run = latest[0].run_id if latest else None
        return result


class AsyncThreadStream(AsyncClosing):
    """One thread's streaming session; use it as a context manager:

    async with client.threads.stream(assistant_id="agent") as thread:
        await thread.run.start(input={...})
        async for values in thread.values: ...
        if thread.interrupted:
            await thread.run.respond(answer)
        final = await thread.output
    """

    def __init__(
        self,
        http: AsyncHTTP,
        *,
        thread_id: str,
        assistant_id: str,
        headers: Mapping[str, str] | None,
        transport: Transport,
    ) -> None:
        if transport not in ("sse", "websocket"):
            raise ValueError("transport must be 'sse' or 'websocket'")
        self._http = http
        self._runs = AsyncRuns(http)
        self._headers = dict(headers or {})
        self.thread_id = thread_id
        self.assistant_id = assistant_id
        self.transport: Transport = transport
        self.interrupted = False
        self.interrupts: list[dict[str, Any]] = []
        self.run = AsyncThreadRun(self)
        self._awaited_run: str | None = None
        self._next_id = 1
        self._open: list[AsyncThreadEvents] = []
        self.cursor: int | None = None  # the highest seq any subscription delivered

    async def aclose(self) -> None:
        """Close every subscription of the session (runs go on)."""
        while self._open:
            await self._open.pop().aclose()

    def subscribe(
        self,
        channels: list[str],
        *,
        namespaces: list[list[str]] | None = None,
        depth: int | None = None,
        since: int | None = None,
    ) -> AsyncThreadEvents:
        """Events of `channels` (optionally under `namespaces`, `depth` levels deep) with
        `seq > since` (None: everything the server keeps), then live ones."""
        body: dict[str, Any] = {"channels": list(channels)}
        if namespaces is not None:
            body["namespaces"] = namespaces
        if depth is not None:
            body["depth"] = depth
        events = AsyncThreadEvents(self, body, since)
        self._open.append(events)
        return events

    @property
    def events(self) -> AsyncThreadEvents:
        """A fresh subscription to every channel."""
        return self.subscribe(ALL_CHANNELS)

    @property
    def values(self) -> AsyncIterator[Any]:
        """The thread's state now, then every `values` event, until the current run ends
        or pauses on an interrupt."""
        return self._values()

    @property
    def output(self) -> Any:
        """(Awaitable) the thread's values once the run this session started or resumed has
        ended; RunFailed if it failed."""
        return self._output()

    async def _values(self) -> AsyncGenerator[Any, None]:
        state = await self._state()
        if state is not None and state.get("values") is not None:
            yield state["values"]
        events = self.subscribe(["values", "lifecycle", "input"], since=self.cursor)
        try:
            async for event in events:
                if event.get("method") == "values":
                    yield event["params"]["data"]
                elif event.get("method") == "input.requested" or is_root(
                    event, "completed", "failed"
                ):
                    return
        finally:
            await events.aclose()
            if events in self._open:
                self._open.remove(events)

    async def _output(self) -> Any:
        run_id = self._awaited_run
        if run_id is None:
            latest = await self._runs.list(self.thread_id, limit=1)
            run_id = latest[0].run_id if latest else None
        if run_id is not None:
            await self._runs.join(self.thread_id, run_id, raise_error=False)
            run = await self._runs.get(self.thread_id, run_id)
            if run.status == "error":
                raise RunFailed("RunFailed", f"run {run_id} ended in error")
        state = await self._state()
        return None if state is None else state.get("values")

    def _observe(self, event: Mapping[str, Any]) -> None:
        seq = event.get("seq")
        if isinstance(seq, int) and (self.cursor is None or seq > self.cursor):
            self.cursor = seq
        if event.get("method") == "input.requested":
            data = event["params"].get("data") or {}
            known = {i["interrupt_id"] for i in self.interrupts}
            if data.get("interrupt_id") not in known:
                self.interrupts.append(
                    {
                        "interrupt_id": data.get("interrupt_id"),
                        "namespace": list(event["params"].get("namespace") or []),
                        "payload": data.get("payload"),
                    }
                )
            self.interrupted = True
        elif is_root(event, "completed", "failed"):
            self.interrupts = []
            self.interrupted = False

    def _path(self, tail: str) -> str:
        return f"/threads/{seg(self.thread_id)}/{tail}"

    async def _command(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        command_id, self._next_id = self._next_id, self._next_id + 1
        response = await self._http.client.post(
            self._path("commands"),
            json={"id": command_id, "method": method, "params": params},
            headers=self._headers,
        )
        raise_for_status(response)
        return command_result(decode_json(response))

    async def _state(self) -> dict[str, Any] | None:
        response = await self._http.client.get(self._path("state"), headers=self._headers)
        if response.status_code == 404:
            return None  # a minted id names no thread until the first run.start
        raise_for_status(response)
        body = decode_json(response)
        return dict(body) if isinstance(body, Mapping) else None

    async def _handshake_headers(self, url: str) -> dict[str, str]:
        """The client's own headers and credentials, plus the session's `headers=`."""
        client = self._http.client
        request = client.build_request("GET", url, headers=self._headers)
        if client.auth is not None:
            flow = client.auth.async_auth_flow(request)
            request = await flow.__anext__()
            await flow.aclose()
        return {k: v for k, v in request.headers.items() if k.lower() not in _HANDSHAKE_DROP}
