"""The thread-stream protocol over WebSocket (contract section 12): `GET
/threads/{t}/stream/events` upgraded. Frames in are command envelopes (the subscription
family, plus any HTTP command in-band); frames out are response envelopes and events.

One follower per socket reads the thread's log from the first subscription's `since` and
sends each event once if any subscription matches it. Rejections after the upgrade close
with `4000 + status`; a server shutdown closes 1012 (never 1000/1001: the SDK reconnects).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import Any

from fastapi import WebSocket, WebSocketDisconnect

from app import metrics
from app.api.errors import status_for, unexpected_answer
from app.api.routing import resource_router
from app.api.thread_protocol import heartbeat_seconds, run_command, thread_log
from app.db.storable import INT64_MAX, INT64_MIN, json_problem
from app.errors import AppError
from app.runs.threadlog.filters import FilterError, Subscription, parse_subscription
from app.runs.threadlog.log import LogReadFailed, ResumeGap
from app.threads.service import parse_thread_id

router = resource_router("threads")

MAX_FRAME_BYTES = 1 << 20
MAX_SUBSCRIPTIONS = 32
COMMANDS_PER_SECOND = 50  # a flood beyond this gets `rate_limited` errors, nothing runs
CLOSE_SHUTDOWN = 1012
CLOSE_GONE = 4410
CLOSE_ERROR = 1011


class _Socket:
    def __init__(self, websocket: WebSocket, state: Any, principal: Any, thread_id: str) -> None:
        self.ws = websocket
        self.state = state
        self.principal = principal
        self.thread_id = thread_id
        self.subs: dict[str, Subscription] = {}
        self.delivered = 0  # highest seq sent on this socket
        self.position = 0  # highest seq the follower has passed (sent or matching nothing)
        self.follower: asyncio.Task[None] | None = None
        self.send_lock = asyncio.Lock()
        self.window = (0.0, 0)

    async def send(self, text: str) -> None:
        async with self.send_lock:
            await self.ws.send_text(text)

    def _flooded(self) -> bool:
        now = asyncio.get_running_loop().time()
        start, count = self.window
        if now - start >= 1.0:
            self.window = (now, 1)
            return False
        self.window = (start, count + 1)
        return count + 1 > COMMANDS_PER_SECOND

    async def follow(self, since: int) -> None:
        log = thread_log(self.state)
        code, reason = CLOSE_SHUTDOWN, "server shutting down"
        try:
            async for batch in log.follow(
                tenant_id=self.principal.tenant_id,
                thread_id=self.thread_id,
                since=since,
                heartbeat=heartbeat_seconds(self.state),
            ):
                # one message per event (the protocol's frame), but the send lock is taken
                # once per page: a replay of thousands of events is one lock, not thousands,
                # and command answers still go between pages, never inside a frame
                async with self.send_lock:
                    for ev in batch:
                        if any(s.matches(ev) for s in self.subs.values()):
                            await self.ws.send_text(ev.envelope())
                            self.delivered = ev.seq
                        self.position = ev.seq
        except ResumeGap as gap:
            # trimmed under a reader that fell behind: the error, then 4410 (a 4xx the SDK
            # does not retry), never a silently skipped event
            with contextlib.suppress(Exception):
                await self.send(json.dumps(gap.envelope(), separators=(",", ":")))
            code, reason = CLOSE_GONE, "resume gap"
        except LogReadFailed as failed:
            # a failed server-side read: the error frame, then 1011 (the SDK reconnects
            # with its cursor), not a silently cut socket
            with contextlib.suppress(Exception):
                await self.send(json.dumps(failed.envelope(), separators=(",", ":")))
            code, reason = CLOSE_ERROR, "event log read failed"
        with contextlib.suppress(Exception):
            await self.ws.close(code, reason)

    def _ok(self, command_id: Any, result: dict[str, Any]) -> dict[str, Any]:
        meta = {"applied_through_seq": self.delivered}
        return {"type": "success", "id": command_id, "result": result, "meta": meta}

    async def subscribe(
        self, command_id: Any, params: dict[str, Any], *, reconnect: bool
    ) -> dict[str, Any]:
        sub = parse_subscription(params)
        if reconnect:
            if sub.since is None:
                raise FilterError("since is required")
        try:
            await thread_log(self.state).check_cursor(
                tenant_id=self.principal.tenant_id, thread_id=self.thread_id, since=sub.since
            )
        except ResumeGap as gap:
            return gap.envelope(command_id)
        if len(self.subs) >= MAX_SUBSCRIPTIONS:
            raise FilterError(f"at most {MAX_SUBSCRIPTIONS} subscriptions per socket")
        given = params.get("subscription_id")
        sub_id = given if reconnect and isinstance(given, str) and given else str(uuid.uuid4())
        async with self.send_lock:  # the follower is between pages
            # caught up first: a failed read leaves no subscription (its answer is the error)
            replayed = 0 if self.follower is None else await self._catch_up(sub)
            self.subs[sub_id] = sub
        if self.follower is None:
            self.position = sub.since or 0  # a later subscription may want what lies before
            self.follower = asyncio.create_task(self.follow(self.position))
        return self._ok(command_id, {"subscription_id": sub_id, "replayed_events": replayed})

    async def _catch_up(self, sub: Subscription) -> int:
        """Send what a subscription added to a running follower would have got: the events
        after its `since` that the follower passed because nothing matched them then (the
        SDK subscribes its content stream after the lifecycle watcher's, and a run's first
        values could go by in between). Only those after the last event sent on the socket:
        its events stay in seq order, and an event is sent once. Called under the send lock."""
        start = max(sub.since or 0, self.delivered)
        if start >= self.position:
            return 0
        missed = await thread_log(self.state).read_between(
            tenant_id=self.principal.tenant_id,
            thread_id=self.thread_id,
            after=start,
            upto=self.position,
        )
        sent = 0
        for ev in missed:
            if sub.matches(ev):
                await self.ws.send_text(ev.envelope())
                self.delivered = ev.seq
                sent += 1
        return sent

    async def handle(self, raw: str) -> dict[str, Any]:
        if len(raw) > MAX_FRAME_BYTES:
            return _error(None, "invalid_argument", "frame too large")
        try:
            envelope, problem = json_problem(raw, "frame")
        except ValueError:
            return _error(None, "invalid_argument", "frame is not JSON")
        if not isinstance(envelope, dict):
            return _error(None, "invalid_argument", problem or "frame must be a JSON object")
        command_id = envelope.get("id")
        if isinstance(command_id, bool) or not isinstance(command_id, int):
            return _error(None, "invalid_argument", "id must be an integer")
        if problem is not None:
            # what HTTP's boundary check refuses (app/api/boundary.py) never reaches a command
            in_range = INT64_MIN <= command_id <= INT64_MAX
            return _error(command_id if in_range else None, "invalid_argument", problem)
        method = envelope.get("method")
        if not isinstance(method, str):
            return _error(command_id, "invalid_argument", "method must be a string")
        if self._flooded():
            return _error(command_id, "rate_limited", "too many commands; slow down")
        params = envelope.get("params") or {}
        if not isinstance(params, dict):
            return _error(command_id, "invalid_argument", "params must be an object")
        try:
            return await self._run(command_id, method, params, envelope)
        except Exception as exc:
            # what no handler answered: the socket's 500 (503 in an outage), logged without
            # values, answered to the command that caused it; the socket stays open
            _status, detail, _headers = unexpected_answer(self.ws.scope, exc)
            return _error(command_id, "unknown_error", detail)

    async def _run(
        self, command_id: int, method: str, params: dict[str, Any], envelope: dict[str, Any]
    ) -> dict[str, Any]:
        try:
            if method in ("subscription.subscribe", "subscription.reconnect"):
                reconnect = method == "subscription.reconnect"
                return await self.subscribe(command_id, params, reconnect=reconnect)
            if method == "subscription.unsubscribe":
                if self.subs.pop(str(params.get("subscription_id")), None) is None:
                    return _error(command_id, "no_such_subscription", "unknown subscription")
                return self._ok(command_id, {})
        except FilterError as exc:
            return _error(command_id, "invalid_argument", str(exc))
        answer = await run_command(
            self.state, self.principal, self.thread_id, envelope, dict(self.ws.headers)
        )
        if answer.get("type") == "success":
            answer["meta"] = {"applied_through_seq": self.delivered}
        return answer


def _error(command_id: Any, code: str, message: str) -> dict[str, Any]:
    return {"type": "error", "id": command_id, "error": code, "message": message}


@router.websocket("/threads/{thread_id}/stream/events")
async def thread_events_socket(websocket: WebSocket, thread_id: str) -> None:
    await websocket.accept()
    state = websocket.app.state.graphkeep
    try:
        thread_id = parse_thread_id(thread_id)
        # the same resolver as PrincipalDep (app/api/auth.py); none installed is a bug,
        # never an anonymous caller
        principal = await websocket.app.state.resolve_principal(websocket)
    except AppError as exc:
        await websocket.close(4000 + status_for(exc), exc.detail[:100])
        return
    sock = _Socket(websocket, state, principal, thread_id)
    metrics.stream_subscribed()
    try:
        while True:
            raw = await websocket.receive_text()
            await sock.send(json.dumps(await sock.handle(raw), separators=(",", ":")))
    except (WebSocketDisconnect, RuntimeError):
        pass  # the client left (or sent a non-text frame and the socket is gone)
    finally:
        metrics.stream_unsubscribed()
        if sock.follower is not None:
            sock.follower.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sock.follower
