"""Run endpoints (contract section 5.3): create, stream, wait, join, list, cancel, delete."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Annotated, Literal

import orjson
from fastapi import Header, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from app import metrics, redaction
from app.api.deps import AppStateDep, PrincipalDep, caller
from app.api.routing import resource_router, serve_first, served_with_body
from app.api.sse import (
    HEARTBEAT,
    KEEPALIVE_JSON,
    SSE_HEADERS,
    SSE_MEDIA_TYPE,
    format_event,
    parse_last_event_id,
    requested_modes,
)
from app.auth.principal import Principal
from app.db.storable import MAX_LIMIT, MAX_OFFSET
from app.errors import ValidationFailed
from app.runs.events import StreamInterrupted
from app.runs.models import Run
from app.runs.schemas import RUN_SELECT_FIELDS, RunCreate, RunsCancel
from app.runs.service import RunService
from app.state import AppState

router = resource_router("runs")

# what a cancel does to the run's checkpoints (contract 5.3): keep them, or drop the run's
CancelAction = Literal["interrupt", "rollback"]


def _service(state: AppState) -> RunService:
    return state.runs


def _run_path(thread_id: str | None, run_id: str) -> str:
    return f"/threads/{thread_id}/runs/{run_id}" if thread_id else f"/runs/{run_id}"


def _keep(event: str, modes: set[str]) -> bool:
    if not modes:
        return True
    base = event.split("|", 1)[0]
    if base.startswith("messages"):
        return bool(modes & {"messages", "messages-tuple"})
    return base in modes


def _sse(
    state: AppState,
    principal: Principal,
    run: Run,
    *,
    after_seq: int | None,
    modes: set[str] | None = None,
    cancel_on_disconnect: bool = False,
    headers: dict[str, str],
    fresh: bool = False,
) -> StreamingResponse:
    service = _service(state)
    resumable = bool(run.kwargs.get("resumable"))
    run_id = run.run_id

    async def events() -> AsyncGenerator[bytes, None]:
        metrics.stream_subscribed()
        try:
            async for ev in service.stream(
                tenant_id=principal.tenant_id, run_id=run_id, after_seq=after_seq, fresh=fresh
            ):
                if ev is None:
                    yield HEARTBEAT
                elif modes is None or _keep(ev.event, modes):
                    yield format_event(ev.event, ev.data, str(ev.seq) if resumable else None)
        finally:
            metrics.stream_unsubscribed()

    body = _cancelled_on_disconnect(state, principal, run, events(), cancel_on_disconnect)
    return StreamingResponse(body, media_type=SSE_MEDIA_TYPE, headers={**SSE_HEADERS, **headers})


async def _cancelled_on_disconnect(
    state: AppState,
    principal: Principal,
    run: Run,
    chunks: AsyncGenerator[bytes, None],
    cancel_on_disconnect: bool,
) -> AsyncIterator[bytes]:
    """`chunks`, and when the client goes away before the last one (and asked for it), the
    run cancelled in the background (the response is already gone, nothing to answer).
    `chunks` is closed here at once, so its own clean-up does not wait for the collector."""
    finished = False
    try:
        async with aclosing(chunks):
            async for chunk in chunks:
                yield chunk
        finished = True
    except StreamInterrupted:
        finished = True  # the server is going away, not the client: the run goes on
        raise  # the connection is cut, so the client reconnects elsewhere
    finally:
        if not finished and cancel_on_disconnect:
            state.spawn(
                _cancel_quietly(_service(state), principal, run.thread_id, run.run_id),
                name="gk-cancel-on-disconnect",
            )


async def _cancel_quietly(
    service: RunService, principal: Principal, thread_id: str, run_id: str
) -> None:
    from app.errors import NotFound

    try:
        await service.cancel(
            tenant_id=principal.tenant_id, thread_id=thread_id, run_id=run_id, action="interrupt"
        )
    except NotFound:
        pass  # already over


def _wait(
    state: AppState,
    principal: Principal,
    run: Run,
    *,
    from_start: bool,
    cancel_on_disconnect: bool,
    headers: dict[str, str],
) -> StreamingResponse:
    service = _service(state)
    # the final values are the caller's own state: masked only when configured so
    redactor = redaction.active() if state.settings.redact_wait_answers else None

    async def output() -> AsyncGenerator[bytes, None]:
        async for out in service.wait_output(
            tenant_id=principal.tenant_id,
            thread_id=run.thread_id,
            run_id=run.run_id,
            from_start=from_start,
        ):
            if out is None:
                yield KEEPALIVE_JSON
            else:
                answer = redactor.value(out) if redactor is not None else out
                yield orjson.dumps(answer, option=orjson.OPT_NON_STR_KEYS)

    body = _cancelled_on_disconnect(state, principal, run, output(), cancel_on_disconnect)
    return StreamingResponse(body, media_type="application/json", headers=headers)


async def _create(
    state: AppState,
    principal: Principal,
    request: Request,
    thread_id: str | None,
    payload: RunCreate,
) -> Run:
    return await _service(state).create(
        principal=principal, thread_id=thread_id, payload=payload, headers=dict(request.headers)
    )


# ---------------------------------------------------------------------- thread runs


@router.post("/threads/{thread_id}/runs")
async def create_thread_run(
    thread_id: str,
    payload: RunCreate,
    request: Request,
) -> JSONResponse:
    state, principal = await caller(request)
    run = await _create(state, principal, request, thread_id, payload)
    return JSONResponse(
        run.to_json(), headers={"Content-Location": _run_path(run.thread_id, run.run_id)}
    )


async def _stream_new_run(
    state: AppState,
    principal: Principal,
    request: Request,
    thread_id: str | None,
    payload: RunCreate,
) -> StreamingResponse:
    """Create a run and stream it from its first event (stateful or stateless)."""
    run = await _create(state, principal, request, thread_id, payload)
    path = _run_path(run.thread_id if thread_id is not None else None, run.run_id)
    return _sse(
        state,
        principal,
        run,
        after_seq=0,
        fresh=True,
        cancel_on_disconnect=payload.on_disconnect == "cancel",
        headers={"Location": f"{path}/stream", "Content-Location": path},
    )


@router.post("/threads/{thread_id}/runs/stream")
async def stream_thread_run(
    thread_id: str,
    payload: RunCreate,
    request: Request,
) -> StreamingResponse:
    state, principal = await caller(request)
    return await _stream_new_run(state, principal, request, thread_id, payload)


async def _wait_new_run(
    state: AppState,
    principal: Principal,
    request: Request,
    thread_id: str | None,
    payload: RunCreate,
) -> StreamingResponse:
    """Create a run and answer with its final output (stateful or stateless); both point
    Location at the run's join URL on its (possibly temporary) thread."""
    run = await _create(state, principal, request, thread_id, payload)
    path = _run_path(run.thread_id, run.run_id)
    return _wait(
        state,
        principal,
        run,
        from_start=True,
        cancel_on_disconnect=payload.on_disconnect == "cancel",
        headers={"Location": f"{path}/join", "Content-Location": path},
    )


@router.post("/threads/{thread_id}/runs/wait")
async def wait_thread_run(
    thread_id: str,
    payload: RunCreate,
    request: Request,
) -> StreamingResponse:
    state, principal = await caller(request)
    return await _wait_new_run(state, principal, request, thread_id, payload)


@router.get("/threads/{thread_id}/runs")
async def list_thread_runs(
    thread_id: str,
    state: AppStateDep,
    principal: PrincipalDep,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 10,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    status: str | None = None,
    select: Annotated[list[str] | None, Query()] = None,
) -> JSONResponse:
    fields = [f for f in (select or []) if f]
    unknown = sorted(set(fields) - RUN_SELECT_FIELDS)
    if unknown:
        raise ValidationFailed(
            f"select: unknown field(s) {', '.join(unknown)}; allowed: "
            f"{', '.join(sorted(RUN_SELECT_FIELDS))}"
        )
    runs = await _service(state).list_runs(
        tenant_id=principal.tenant_id,
        thread_id=thread_id,
        limit=limit,
        offset=offset,
        status=status or None,
    )
    items = [run.to_json() for run in runs]
    if fields:
        items = [{k: v for k, v in item.items() if k in fields} for item in items]
    return JSONResponse(items)


@router.get("/threads/{thread_id}/runs/{run_id}")
async def get_thread_run(
    thread_id: str, run_id: str, state: AppStateDep, principal: PrincipalDep
) -> JSONResponse:
    run = await _service(state).get(
        tenant_id=principal.tenant_id, thread_id=thread_id, run_id=run_id
    )
    return JSONResponse(run.to_json())


async def _serve_get_thread_run(request: Request, _body: None) -> Response:
    state, principal = await caller(request)
    path = request.path_params
    return await get_thread_run(path["thread_id"], path["run_id"], state, principal)


# the busiest run routes skip FastAPI's generic handler (app/api/routing.py: ServedFirst)
for _thread_route in (create_thread_run, stream_thread_run, wait_thread_run):
    serve_first(router, _thread_route, served_with_body(_thread_route), RunCreate)
serve_first(router, get_thread_run, _serve_get_thread_run, None)


@router.delete("/threads/{thread_id}/runs/{run_id}", status_code=204)
async def delete_thread_run(
    thread_id: str, run_id: str, state: AppStateDep, principal: PrincipalDep
) -> Response:
    await _service(state).delete(tenant_id=principal.tenant_id, thread_id=thread_id, run_id=run_id)
    return Response(status_code=204)


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_thread_run(
    thread_id: str,
    run_id: str,
    state: AppStateDep,
    principal: PrincipalDep,
    cancel_on_disconnect: bool = False,
) -> StreamingResponse:
    run = await _service(state).get(
        tenant_id=principal.tenant_id, thread_id=thread_id, run_id=run_id
    )
    path = _run_path(run.thread_id, run.run_id)
    return _wait(
        state,
        principal,
        run,
        from_start=False,
        cancel_on_disconnect=cancel_on_disconnect,
        headers={"Location": f"{path}/join"},
    )


@router.get("/threads/{thread_id}/runs/{run_id}/stream")
async def join_thread_run_stream(
    thread_id: str,
    run_id: str,
    state: AppStateDep,
    principal: PrincipalDep,
    stream_mode: Annotated[list[str] | None, Query()] = None,
    cancel_on_disconnect: bool = False,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> StreamingResponse:
    after = parse_last_event_id(last_event_id)
    modes = requested_modes(stream_mode or [])
    run = await _service(state).get(
        tenant_id=principal.tenant_id, thread_id=thread_id, run_id=run_id
    )
    path = _run_path(run.thread_id, run.run_id)
    return _sse(
        state,
        principal,
        run,
        after_seq=after,
        modes=modes,
        cancel_on_disconnect=cancel_on_disconnect,
        headers={"Location": f"{path}/stream"},
    )


@router.post("/threads/{thread_id}/runs/{run_id}/cancel", response_model=None)
async def cancel_thread_run(
    thread_id: str,
    run_id: str,
    state: AppStateDep,
    principal: PrincipalDep,
    wait: bool = False,
    action: CancelAction = "interrupt",
) -> Response:
    service = _service(state)
    run = await service.get(tenant_id=principal.tenant_id, thread_id=thread_id, run_id=run_id)
    await service.cancel(
        tenant_id=principal.tenant_id,
        thread_id=run.thread_id,
        run_id=run.run_id,
        action=action,
    )
    if not wait:
        return Response(status_code=202)
    path = _run_path(run.thread_id, run.run_id)
    return _wait(
        state,
        principal,
        run,
        from_start=False,
        cancel_on_disconnect=False,
        headers={"Location": f"{path}/join"},
    )


# ---------------------------------------------------------------------- stateless runs


@router.post("/runs")
async def create_stateless_run(
    payload: RunCreate,
    request: Request,
) -> JSONResponse:
    state, principal = await caller(request)
    run = await _create(state, principal, request, None, payload)
    return JSONResponse(run.to_json(), headers={"Content-Location": _run_path(None, run.run_id)})


@router.post("/runs/stream")
async def stream_stateless_run(
    payload: RunCreate,
    request: Request,
) -> StreamingResponse:
    state, principal = await caller(request)
    return await _stream_new_run(state, principal, request, None, payload)


@router.get("/runs/{run_id}/stream")
async def join_stateless_run_stream(
    run_id: str,
    state: AppStateDep,
    principal: PrincipalDep,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> StreamingResponse:
    after = parse_last_event_id(last_event_id)
    run = await _service(state).get(tenant_id=principal.tenant_id, thread_id=None, run_id=run_id)
    return _sse(
        state, principal, run, after_seq=after, headers={"Location": f"/runs/{run_id}/stream"}
    )


@router.post("/runs/wait")
async def wait_stateless_run(
    payload: RunCreate,
    request: Request,
) -> StreamingResponse:
    state, principal = await caller(request)
    return await _wait_new_run(state, principal, request, None, payload)


for _stateless_route in (create_stateless_run, stream_stateless_run, wait_stateless_run):
    serve_first(router, _stateless_route, served_with_body(_stateless_route), RunCreate)


@router.post("/runs/batch")
async def create_run_batch(
    payloads: list[RunCreate], request: Request, state: AppStateDep, principal: PrincipalDep
) -> JSONResponse:
    runs = [await _create(state, principal, request, None, p) for p in payloads]
    return JSONResponse([run.to_json() for run in runs])


@router.post("/runs/cancel", status_code=204)
async def cancel_runs(
    body: RunsCancel,
    state: AppStateDep,
    principal: PrincipalDep,
    action: CancelAction = "interrupt",
) -> Response:
    by_ids = body.run_ids is not None or body.thread_id is not None
    if by_ids and body.status is not None:
        raise ValidationFailed("give either thread_id and run_ids, or status, not both")
    if not by_ids and body.status is None:
        raise ValidationFailed("give thread_id and run_ids, or status")
    if by_ids and (body.thread_id is None or body.run_ids is None):
        raise ValidationFailed("thread_id and run_ids go together")
    await _service(state).cancel_many(
        tenant_id=principal.tenant_id,
        thread_id=body.thread_id,
        run_ids=body.run_ids,
        status=body.status,
        action=action,
    )
    return Response(status_code=204)
