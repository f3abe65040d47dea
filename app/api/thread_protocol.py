"""The thread-stream protocol's HTTP routes (contract sections 2, 3, 7, 8):
`POST /threads/{t}/commands` (one command, JSON in / JSON out) and
`POST /threads/{t}/stream/events` (an SSE stream over the thread's durable event log).

A valid UUID naming no thread of the caller's tenant streams nothing until such a thread
gets events (another tenant's log is never read: every read carries the caller's tenant).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from app import metrics
from app.api.deps import AppStateDep, PrincipalDep
from app.api.errors import status_for
from app.api.routing import resource_router
from app.api.sse import HEARTBEAT, SSE_HEADERS, SSE_MEDIA_TYPE, format_event, format_events
from app.db.storable import body_problem
from app.errors import AppError
from app.runs.protocol_commands import CommandError, ProtocolCommands, app_error_message
from app.runs.threadlog.filters import FilterError, parse_subscription
from app.runs.threadlog.log import LogReadFailed, ResumeGap, ThreadLog
from app.state import AppState
from app.threads.service import parse_thread_id

router = resource_router("threads")
log = logging.getLogger(__name__)

MAX_COMMAND_BYTES = 1 << 20


def heartbeat_seconds(state: AppState) -> float:
    """`: heartbeat` after this much silence (the contract's 5 s is the setting's default)."""
    return float(state.settings.stream_keepalive_seconds)


def _thread_id(value: str) -> str:
    return parse_thread_id(value)  # 422 before anything streams


async def _json_body(request: Request) -> Any:
    """The body as JSON whatever its content type (the SDK's client sends none at times), or
    a JSONResponse refusing it: 400 when it is not JSON, and what HTTP's boundary check
    refuses in a JSON body (which it alone has read) refused the same way."""
    raw = await request.body()
    if len(raw) > MAX_COMMAND_BYTES:
        return _invalid()
    refused = body_problem(raw)
    if refused is not None:
        status, detail = refused
        return JSONResponse({"detail": detail}, status_code=status)
    try:
        return json.loads(raw)
    except ValueError:  # (too deep for the parser is body_problem's)
        return _invalid()


def _invalid() -> JSONResponse:
    # a new one each time: middleware appends its headers to a response's own list
    return JSONResponse({"detail": "Invalid JSON body"}, status_code=400)


def _error(command_id: Any, code: str, message: str) -> dict[str, Any]:
    return {"type": "error", "id": command_id, "error": code, "message": message}


def _commands(state: AppState) -> ProtocolCommands:
    return ProtocolCommands(runs=state.runs, threads=state.threads)


async def run_command(
    state: AppState,
    principal: Any,
    thread_id: str,
    envelope: dict[str, Any],
    headers: dict[str, str],
) -> dict[str, Any]:
    """One command's response envelope (errors included; never raises for the caller)."""
    command_id = envelope["id"]
    method = envelope["method"]
    params = envelope.get("params") or {}
    if not isinstance(params, dict):
        return _error(command_id, "invalid_argument", "params must be an object")
    commands = _commands(state)
    try:
        if method == "run.start":
            result = await commands.run_start(principal, thread_id, params, headers)
        elif method == "input.respond":
            result = await commands.input_respond(principal, thread_id, params, headers)
        elif method == "agent.getTree":
            raise CommandError("no_such_run", "no run session bound to this request")
        elif method == "subscription.subscribe":
            parse_subscription(params)
            result = {"subscription_id": "", "replayed_events": 0}
        else:
            raise CommandError("unknown_command", f"unknown command: {method[:64]!r}")
    except CommandError as exc:
        return _error(command_id, exc.code, exc.message)
    except FilterError as exc:
        return _error(command_id, "invalid_argument", str(exc))
    except AppError as exc:
        return _error(command_id, "unknown_error", app_error_message(status_for(exc), exc))
    return {
        "type": "success",
        "id": command_id,
        "result": result,
        "meta": {"applied_through_seq": 0},  # over HTTP nothing was delivered here
    }


@router.post("/threads/{thread_id}/commands", operation_id="thread_command")
async def thread_command(
    thread_id: str, request: Request, state: AppStateDep, principal: PrincipalDep
) -> JSONResponse:
    """One protocol command; command errors are HTTP 200 error envelopes."""
    body = await _json_body(request)
    if isinstance(body, JSONResponse):
        return body
    if not isinstance(body, dict):
        return JSONResponse(
            _error(None, "invalid_argument", "the command must be a JSON object"), status_code=400
        )
    command_id = body.get("id")
    if isinstance(command_id, bool) or not isinstance(command_id, int):
        return JSONResponse(
            _error(None, "invalid_argument", "id must be an integer"), status_code=400
        )
    if not isinstance(body.get("method"), str):
        return JSONResponse(
            _error(command_id, "invalid_argument", "method must be a string"), status_code=400
        )
    thread_id = _thread_id(thread_id)
    answer = await run_command(state, principal, thread_id, body, dict(request.headers))
    return JSONResponse(answer)


def thread_log(state: AppState) -> ThreadLog:
    return ThreadLog(state.engine, state.runs.hub)


@router.post("/threads/{thread_id}/stream/events", operation_id="stream_thread_events")
async def stream_thread_events(
    thread_id: str, request: Request, state: AppStateDep, principal: PrincipalDep
) -> Response:
    """The thread's events (every run, oldest first, `seq > since`), then live, until the
    client leaves; `: heartbeat` every `stream_keepalive_seconds` (5 s) of silence. A `since`
    older than the kept log (prune, retention): 410 with the `resume_gap` error."""
    body = await _json_body(request)
    if isinstance(body, JSONResponse):
        return body
    if not isinstance(body, dict):
        return JSONResponse({"detail": "the body must be a JSON object"}, status_code=400)
    try:
        subscription = parse_subscription(body)
    except FilterError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=400)
    thread_id = _thread_id(thread_id)
    reader = thread_log(state)
    tenant_id = principal.tenant_id
    try:
        await reader.check_cursor(
            tenant_id=tenant_id, thread_id=thread_id, since=subscription.since
        )
    except ResumeGap as gap:
        # graphkeep: a cursor the log no longer covers is refused before streaming (the SDK
        # gives up on a 4xx and surfaces it) instead of silently replaying what is left
        return JSONResponse({"detail": str(gap), **gap.envelope()}, status_code=410)

    async def events() -> AsyncIterator[bytes]:
        metrics.stream_subscribed()
        try:
            yield HEARTBEAT  # headers and a first byte at once (the SDK's 5 s ready wait)
            async for batch in reader.follow(
                tenant_id=tenant_id,
                thread_id=thread_id,
                since=subscription.since or 0,
                heartbeat=heartbeat_seconds(state),
            ):
                if not batch:
                    yield HEARTBEAT
                    continue
                chunk = format_events(
                    (ev.method, ev.envelope(), str(ev.seq))
                    for ev in batch
                    if subscription.matches(ev)
                )
                if chunk:
                    yield chunk
        except ResumeGap as gap:
            # trimmed under a reader that fell behind: say so, then end (never skip events)
            yield format_event("error", json.dumps(gap.envelope(), separators=(",", ":")))
        except LogReadFailed as failed:
            # a server-side read failed: an error frame the client can act on (reconnect
            # with its cursor), then a clean end instead of a cut connection
            yield format_event("error", json.dumps(failed.envelope(), separators=(",", ":")))
        finally:
            metrics.stream_unsubscribed()

    return StreamingResponse(events(), media_type=SSE_MEDIA_TYPE, headers=SSE_HEADERS)
