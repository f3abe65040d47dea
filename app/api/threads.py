"""Threads router: thread CRUD, search, copy, prune, state, history and update_state."""

from __future__ import annotations

from contextlib import suppress

from fastapi import Header, Query, Request, Response
from fastapi.responses import JSONResponse

from app.api.deps import AppStateDep, PrincipalDep, caller
from app.api.paging import page_response
from app.api.responses import json_response, model_response
from app.api.routing import QUERY_BOOLS, resource_router, serve_first
from app.api.thread_stream import StateUpdates
from app.errors import NotFound
from app.runs.threadlog.retention import trim_threads
from app.threads import state as thread_state
from app.threads.schemas import (
    HistoryRequest,
    PruneResult,
    StateCheckpointRequest,
    StateUpdate,
    StateUpdateResult,
    Thread,
    ThreadCount,
    ThreadCreate,
    ThreadPatch,
    ThreadPrune,
    ThreadSearch,
    ThreadState,
)
from app.threads.service import parse_thread_id

router = resource_router("threads")


# The official server's default when a history request gives no limit.
DEFAULT_HISTORY_LIMIT = 1
SELECT_QUERY = Query(
    None, description="Fields to return (repeated or comma-separated); `values.<key>` for one key."
)


def _query_list(values: list[str] | None) -> list[str] | None:
    """A repeated query parameter, each value possibly a comma-separated list."""
    if not values:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


@router.post(
    "/threads", operation_id="create_thread", response_model=Thread, response_model_exclude={"ttl"}
)
async def create_thread(
    request: Request,
    body: ThreadCreate,
) -> Response:
    state, principal = await caller(request)
    if body.supersteps:
        updates = StateUpdates(state, principal.tenant_id)
        thread = await thread_state.create_thread_with_supersteps(
            state.threads.storage,
            tenant_id=principal.tenant_id,
            body=body,
            on_change=updates.record,
        )
        updates.wake()
        return model_response(thread, exclude={"ttl"})
    thread = await state.threads.create_thread(tenant_id=principal.tenant_id, body=body)
    return model_response(thread, exclude={"ttl"})


@router.post("/threads/search", operation_id="search_threads")
async def search_threads(
    request: Request,
    body: ThreadSearch,
) -> JSONResponse:
    state, principal = await caller(request)
    page = await state.threads.search_threads(tenant_id=principal.tenant_id, body=body)
    return page_response(page.items, has_more=page.has_more, limit=body.limit, offset=body.offset)


@router.post("/threads/count", operation_id="count_threads")
async def count_threads(request: Request, body: ThreadCount) -> int:
    state, principal = await caller(request)
    return await state.threads.count_threads(tenant_id=principal.tenant_id, body=body)


async def _serve_count_threads(request: Request, body: ThreadCount) -> Response:
    return JSONResponse(await count_threads(request, body))


@router.post("/threads/prune", operation_id="prune_threads", response_model=PruneResult)
async def prune_threads(
    body: ThreadPrune, state: AppStateDep, principal: PrincipalDep
) -> PruneResult:
    count = await state.threads.prune_threads(tenant_id=principal.tenant_id, body=body)
    if body.strategy == "keep_latest":  # `delete` took the thread-stream log with the threads
        ids = [parse_thread_id(i) for i in body.thread_ids]
        await trim_threads(state.engine, tenant_id=principal.tenant_id, thread_ids=ids)
    return PruneResult(pruned_count=count)


@router.get("/threads/{thread_id}", operation_id="get_thread", response_model=Thread)
async def get_thread(
    request: Request,
    thread_id: str,
    include: str | None = Query(None, description="comma-separated extras: ttl"),
) -> Response:
    state, principal = await caller(request)
    include_ttl = "ttl" in [part.strip() for part in (include or "").split(",")]
    thread = await state.threads.get_thread(
        tenant_id=principal.tenant_id,
        thread_id=thread_id,
        include_ttl=include_ttl,
        # custom auth (app/api/authz.py): applied in the same query
        auth_filter=dict(principal.auth_filter) if principal.auth_filter else None,
    )
    return model_response(thread, exclude=None if include_ttl else {"ttl"})


async def _serve_get_thread(request: Request, _body: None) -> Response:
    # the documented parameters, read as FastAPI reads them (a plain str each: never a 422)
    return await get_thread(
        request, request.path_params["thread_id"], request.query_params.get("include")
    )


# the busiest thread routes skip FastAPI's generic handler (app/api/routing.py)
serve_first(router, search_threads, search_threads, ThreadSearch)
serve_first(router, count_threads, _serve_count_threads, ThreadCount)
serve_first(router, create_thread, create_thread, ThreadCreate)
serve_first(router, get_thread, _serve_get_thread, None)


@router.patch("/threads/{thread_id}", operation_id="patch_thread", response_model=Thread)
async def patch_thread(
    request: Request,
    thread_id: str,
    body: ThreadPatch,
    prefer: str | None = Header(None),
) -> Response:
    state, principal = await caller(request)
    thread = await state.threads.patch_thread(
        tenant_id=principal.tenant_id, thread_id=thread_id, body=body
    )
    if prefer and "return=minimal" in prefer.replace(" ", "").lower():
        return Response(status_code=204)
    return model_response(thread, exclude={"ttl"})


async def _serve_patch_thread(request: Request, body: ThreadPatch) -> Response:
    # the path parameter and the header, read as FastAPI reads them (plain strings)
    thread_id = request.path_params["thread_id"]
    return await patch_thread(request, thread_id, body, request.headers.get("prefer"))


serve_first(router, patch_thread, _serve_patch_thread, ThreadPatch)


@router.delete("/threads/{thread_id}", operation_id="delete_thread", status_code=204)
async def delete_thread(thread_id: str, state: AppStateDep, principal: PrincipalDep) -> Response:
    """Allowed with a run in flight: the run is cancelled first, then everything goes."""
    thread = await state.threads.get_thread(tenant_id=principal.tenant_id, thread_id=thread_id)
    active = await state.threads.active_run_ids(
        tenant_id=principal.tenant_id, thread_id=thread.thread_id
    )
    if active and state.runs is not None:
        with suppress(NotFound):  # they may have finished in the meantime
            await state.runs.cancel_many(
                tenant_id=principal.tenant_id,
                thread_id=thread.thread_id,
                run_ids=active,
                status=None,
                action="interrupt",
            )
    await state.threads.delete_thread(tenant_id=principal.tenant_id, thread_id=thread_id)
    return Response(status_code=204)


@router.post(
    "/threads/{thread_id}/copy",
    operation_id="copy_thread",
    response_model=Thread,
    response_model_exclude={"ttl"},
)
async def copy_thread(thread_id: str, state: AppStateDep, principal: PrincipalDep) -> Thread:
    return await state.threads.copy_thread(tenant_id=principal.tenant_id, thread_id=thread_id)


@router.get(
    "/threads/{thread_id}/state", operation_id="get_thread_state", response_model=ThreadState
)
async def get_state(
    request: Request,
    thread_id: str,
    subgraphs: bool = Query(False),
    select: list[str] | None = SELECT_QUERY,
) -> Response:
    state, principal = await caller(request)
    result = await thread_state.get_state(
        state.threads.storage,
        tenant_id=principal.tenant_id,
        thread_id=thread_id,
        subgraphs=subgraphs,
        select=_query_list(select),
    )
    return json_response(result)


async def _serve_get_state(request: Request, _body: None) -> Response | None:
    query = request.query_params
    subgraphs = QUERY_BOOLS.get(query.get("subgraphs", "false"))
    if subgraphs is None:
        return None  # a spelling FastAPI judges (or refuses)
    select = query.getlist("select") or None
    return await get_state(request, request.path_params["thread_id"], subgraphs, select)


serve_first(router, get_state, _serve_get_state, None)


@router.post(
    "/threads/{thread_id}/state",
    operation_id="update_thread_state",
    response_model=StateUpdateResult,
)
async def update_state(
    thread_id: str, body: StateUpdate, state: AppStateDep, principal: PrincipalDep
) -> StateUpdateResult:
    updates = StateUpdates(state, principal.tenant_id)  # the thread stream's state_update
    result = await thread_state.update_state(
        state.threads.storage,
        tenant_id=principal.tenant_id,
        thread_id=thread_id,
        body=body,
        on_change=updates.record,
    )
    updates.wake()
    return result


@router.post(
    "/threads/{thread_id}/state/checkpoint",
    operation_id="get_thread_state_at_checkpoint_post",
    response_model=ThreadState,
)
async def get_state_at_checkpoint_post(
    thread_id: str, body: StateCheckpointRequest, state: AppStateDep, principal: PrincipalDep
) -> Response:
    result = await thread_state.get_state(
        state.threads.storage,
        tenant_id=principal.tenant_id,
        thread_id=thread_id,
        checkpoint=body.checkpoint,
        subgraphs=body.subgraphs,
        select=body.select,
    )
    return json_response(result)


@router.get(
    "/threads/{thread_id}/state/{checkpoint_id}",
    operation_id="get_thread_state_at_checkpoint",
    response_model=ThreadState,
)
async def get_state_at_checkpoint(
    thread_id: str,
    checkpoint_id: str,
    state: AppStateDep,
    principal: PrincipalDep,
    subgraphs: bool = Query(False),
    select: list[str] | None = SELECT_QUERY,
) -> Response:
    result = await thread_state.get_state(
        state.threads.storage,
        tenant_id=principal.tenant_id,
        thread_id=thread_id,
        checkpoint={"checkpoint_id": checkpoint_id},
        subgraphs=subgraphs,
        select=_query_list(select),
    )
    return json_response(result)


@router.post(
    "/threads/{thread_id}/history",
    operation_id="get_thread_history",
    response_model=list[ThreadState],
)
async def post_history(
    request: Request,
    thread_id: str,
    body: HistoryRequest,
) -> Response:
    state, principal = await caller(request)
    if "limit" not in body.model_fields_set:
        body = body.model_copy(update={"limit": DEFAULT_HISTORY_LIMIT})
    result = await thread_state.get_history(
        state.threads.storage,
        tenant_id=principal.tenant_id,
        thread_id=thread_id,
        body=body,
    )
    return json_response(result)


async def _serve_post_history(request: Request, body: HistoryRequest) -> Response:
    return await post_history(request, request.path_params["thread_id"], body)


serve_first(router, post_history, _serve_post_history, HistoryRequest)


@router.get(
    "/threads/{thread_id}/history",
    operation_id="get_thread_history_get",
    response_model=list[ThreadState],
)
async def get_history(
    thread_id: str,
    state: AppStateDep,
    principal: PrincipalDep,
    limit: int = Query(DEFAULT_HISTORY_LIMIT, ge=1, le=1000),
    before: str | None = Query(None, description="checkpoint id"),
    select: list[str] | None = SELECT_QUERY,
) -> Response:
    result = await thread_state.get_history(
        state.threads.storage,
        tenant_id=principal.tenant_id,
        thread_id=thread_id,
        body=HistoryRequest(limit=limit, before=before, select=_query_list(select)),
    )
    return json_response(result)


# FastAPI tries routes in order (twice per request): thread create and the state and history
# routes first. No two routes here match the same path and method, so the order is free.
_HOT_PATHS = ("/threads", "/threads/{thread_id}/state", "/threads/{thread_id}/history")
router.routes.sort(key=lambda route: getattr(route, "path", None) not in _HOT_PATHS)
