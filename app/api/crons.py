"""Cron endpoints (contract: the official server's `/runs/crons` family) and thread storage."""

from __future__ import annotations

from typing import Any

from fastapi import Response
from fastapi.responses import JSONResponse

from app.api.deps import AppStateDep, PrincipalDep
from app.api.paging import page_response
from app.api.routing import resource_router
from app.crons.schemas import CronCount, CronCreate, CronSearch, CronUpdate
from app.crons.service import CronService
from app.state import AppState
from app.threads.storage import thread_storage

router = resource_router("crons")


def _service(state: AppState) -> CronService:
    return state.crons


@router.post("/runs/crons", operation_id="create_cron")
async def create_cron(
    body: CronCreate, state: AppStateDep, principal: PrincipalDep
) -> dict[str, Any]:
    """A stateless cron: each firing runs on a new thread (kept or deleted: on_run_completed)."""
    return await _service(state).create(principal=principal, thread_id=None, body=body)


@router.post("/threads/{thread_id}/runs/crons", operation_id="create_thread_cron")
async def create_thread_cron(
    thread_id: str, body: CronCreate, state: AppStateDep, principal: PrincipalDep
) -> dict[str, Any]:
    """A cron on one thread; each firing honours its multitask_strategy."""
    return await _service(state).create(principal=principal, thread_id=thread_id, body=body)


@router.post("/runs/crons/search", operation_id="search_crons")
async def search_crons(body: CronSearch, state: AppStateDep, principal: PrincipalDep) -> Response:
    items, has_more = await _service(state).search(tenant_id=principal.tenant_id, body=body)
    return page_response(items, has_more=has_more, limit=body.limit, offset=body.offset)


@router.post("/runs/crons/count", operation_id="count_crons")
async def count_crons(body: CronCount, state: AppStateDep, principal: PrincipalDep) -> int:
    return await _service(state).count(tenant_id=principal.tenant_id, body=body)


@router.get("/runs/crons/{cron_id}", operation_id="get_cron")
async def get_cron(cron_id: str, state: AppStateDep, principal: PrincipalDep) -> dict[str, Any]:
    return await _service(state).get(tenant_id=principal.tenant_id, cron_id=cron_id)


@router.patch("/runs/crons/{cron_id}", operation_id="update_cron")
async def update_cron(
    cron_id: str, body: CronUpdate, state: AppStateDep, principal: PrincipalDep
) -> dict[str, Any]:
    return await _service(state).update(tenant_id=principal.tenant_id, cron_id=cron_id, body=body)


@router.delete("/runs/crons/{cron_id}", operation_id="delete_cron", status_code=204)
async def delete_cron(cron_id: str, state: AppStateDep, principal: PrincipalDep) -> Response:
    await _service(state).delete(tenant_id=principal.tenant_id, cron_id=cron_id)
    return Response(status_code=204)


@router.get("/threads/{thread_id}/storage", operation_id="get_thread_storage")
async def get_thread_storage(
    thread_id: str, state: AppStateDep, principal: PrincipalDep
) -> JSONResponse:
    """Bytes and rows the thread's checkpoints, blobs, pending writes and events occupy."""
    figures = await thread_storage(state.engine, tenant_id=principal.tenant_id, thread_id=thread_id)
    return JSONResponse(figures)
