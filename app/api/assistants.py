"""Assistants router: parse, call one service function, return the contract's shape."""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from fastapi import Query, Request, Response
from fastapi.responses import JSONResponse

from app.api.deps import AppStateDep, PrincipalDep, caller
from app.api.paging import page_response
from app.api.responses import model_response
from app.api.routing import resource_router, serve_first
from app.assistants import introspection
from app.assistants.schemas import (
    Assistant,
    AssistantCount,
    AssistantCreate,
    AssistantPatch,
    AssistantSearch,
    AssistantSetLatest,
    AssistantVersion,
    AssistantVersionsSearch,
    GraphSchemas,
)
from app.db.ids import parse_uuid
from app.errors import NotFound

router = resource_router("assistants")


@router.post("/assistants", operation_id="create_assistant", response_model=Assistant)
async def create_assistant(
    body: AssistantCreate, state: AppStateDep, principal: PrincipalDep
) -> Assistant:
    return await state.assistants.create_assistant(tenant_id=principal.tenant_id, body=body)


@router.post("/assistants/search", operation_id="search_assistants")
async def search_assistants(
    request: Request,
    body: AssistantSearch,
) -> JSONResponse:
    state, principal = await caller(request)
    page = await state.assistants.search_assistants(tenant_id=principal.tenant_id, body=body)
    return page_response(page.items, has_more=page.has_more, limit=body.limit, offset=body.offset)


@router.post("/assistants/count", operation_id="count_assistants")
async def count_assistants(
    body: AssistantCount, state: AppStateDep, principal: PrincipalDep
) -> int:
    return await state.assistants.count_assistants(tenant_id=principal.tenant_id, body=body)


@router.get("/assistants/{assistant_id}", operation_id="get_assistant", response_model=Assistant)
async def get_assistant(request: Request, assistant_id: str) -> Response:
    state, principal = await caller(request)
    assistant = await state.assistants.get_assistant(
        tenant_id=principal.tenant_id, assistant_id=assistant_id
    )
    return model_response(assistant)


async def _serve_get_assistant(request: Request, _body: None) -> Response:
    # the one documented parameter, read as FastAPI reads it (a plain str: never a 422)
    return await get_assistant(request, request.path_params["assistant_id"])


# the busiest assistant reads skip FastAPI's generic handler (app/api/routing.py: ServedFirst)
serve_first(router, search_assistants, search_assistants, AssistantSearch)
serve_first(router, get_assistant, _serve_get_assistant, None)


@router.patch(
    "/assistants/{assistant_id}", operation_id="patch_assistant", response_model=Assistant
)
async def patch_assistant(
    assistant_id: str, body: AssistantPatch, state: AppStateDep, principal: PrincipalDep
) -> Assistant:
    return await state.assistants.patch_assistant(
        tenant_id=principal.tenant_id,
        assistant_id=assistant_id,
        body=body,
    )


@router.delete("/assistants/{assistant_id}", operation_id="delete_assistant", status_code=204)
async def delete_assistant(
    assistant_id: str,
    state: AppStateDep,
    principal: PrincipalDep,
    delete_threads: bool = Query(False),
) -> Response:
    """Deletes every version; its in-flight runs are cancelled first."""
    await state.assistants.delete_assistant(
        tenant_id=principal.tenant_id, assistant_id=assistant_id
    )
    active = await state.assistants.active_run_ids(
        tenant_id=principal.tenant_id, assistant_id=assistant_id
    )
    if active and state.runs is not None:
        with suppress(NotFound):  # they may have finished in the meantime
            await state.runs.cancel_many(
                tenant_id=principal.tenant_id,
                thread_id=None,
                run_ids=active,
                status=None,
                action="interrupt",
            )
    if delete_threads:
        await state.threads.delete_threads_of_assistant(
            tenant_id=principal.tenant_id,
            assistant_id=parse_uuid(assistant_id, what="assistant_id"),
        )
    return Response(status_code=204)


@router.post(
    "/assistants/{assistant_id}/versions",
    operation_id="list_assistant_versions",
    response_model=list[AssistantVersion],
)
async def list_versions(
    assistant_id: str, body: AssistantVersionsSearch, state: AppStateDep, principal: PrincipalDep
) -> list[AssistantVersion]:
    return await state.assistants.list_versions(
        tenant_id=principal.tenant_id,
        assistant_id=assistant_id,
        body=body,
    )


@router.post(
    "/assistants/{assistant_id}/latest",
    operation_id="set_latest_assistant_version",
    response_model=Assistant,
)
async def set_latest(
    assistant_id: str, body: AssistantSetLatest, state: AppStateDep, principal: PrincipalDep
) -> Assistant:
    return await state.assistants.set_latest_version(
        tenant_id=principal.tenant_id,
        assistant_id=assistant_id,
        version=body.version,
    )


@router.get(
    "/assistants/{assistant_id}/schemas",
    operation_id="get_assistant_schemas",
    response_model=GraphSchemas,
)
async def get_schemas(
    assistant_id: str, state: AppStateDep, principal: PrincipalDep
) -> GraphSchemas:
    return await introspection.get_schemas(
        state.assistants,
        tenant_id=principal.tenant_id,
        assistant_id=assistant_id,
        graphs=state.graphs,
    )


@router.get("/assistants/{assistant_id}/subgraphs", operation_id="get_assistant_subgraphs")
async def get_subgraphs(
    assistant_id: str, state: AppStateDep, principal: PrincipalDep, recurse: bool = Query(False)
) -> dict[str, Any]:
    return await introspection.get_subgraphs(
        state.assistants,
        tenant_id=principal.tenant_id,
        assistant_id=assistant_id,
        namespace=None,
        recurse=recurse,
        graphs=state.graphs,
    )


@router.get(
    "/assistants/{assistant_id}/subgraphs/{namespace}",
    operation_id="get_assistant_subgraphs_by_namespace",
)
async def get_subgraphs_by_namespace(
    assistant_id: str,
    namespace: str,
    state: AppStateDep,
    principal: PrincipalDep,
    recurse: bool = Query(False),
) -> dict[str, Any]:
    return await introspection.get_subgraphs(
        state.assistants,
        tenant_id=principal.tenant_id,
        assistant_id=assistant_id,
        namespace=namespace,
        recurse=recurse,
        graphs=state.graphs,
    )


@router.get("/assistants/{assistant_id}/graph", operation_id="get_assistant_graph")
async def get_graph(
    assistant_id: str,
    state: AppStateDep,
    principal: PrincipalDep,
    xray: str | None = Query(None, description="true, false or a positive depth"),
) -> dict[str, Any]:
    return await introspection.get_graph_drawing(
        state.assistants,
        tenant_id=principal.tenant_id,
        assistant_id=assistant_id,
        xray=xray,
        graphs=state.graphs,
    )
