"""Store router: long-term memory items, search and namespaces (contract section 7)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request, Response
from langgraph.store.base import Item, SearchItem
from pydantic import BaseModel, ConfigDict, Field

from app.api.deps import AppStateDep, PrincipalDep, caller
from app.api.responses import json_response
from app.api.routing import QUERY_BOOLS, resource_router, serve_first
from app.db.storable import (
    MAX_KEY_BYTES,
    MAX_LIMIT,
    MAX_NAMESPACE_DEPTH,
    Filter,
    JSONBool,
    JSONFloat,
    JSONInt,
    JSONNumber,
    Offset,
)
from app.errors import InvalidInput, ValidationFailed
from app.threads.schemas import MAX_TTL_MINUTES

router = resource_router("store")


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class StorePut(_Request):
    namespace: list[str] = Field(min_length=1, max_length=MAX_NAMESPACE_DEPTH)
    key: str = Field(max_length=MAX_KEY_BYTES)
    value: dict[str, Any]
    index: JSONBool | list[str] | None = None
    ttl: JSONFloat | None = Field(
        None, gt=0, le=MAX_TTL_MINUTES, description="Minutes from the last write."
    )


class StoreDelete(_Request):
    namespace: list[str] = Field(min_length=1, max_length=MAX_NAMESPACE_DEPTH)
    key: str = Field(max_length=MAX_KEY_BYTES)


class StoreSearch(_Request):
    namespace_prefix: list[str] = Field(default_factory=list, max_length=MAX_NAMESPACE_DEPTH)
    filter: Filter = None
    limit: JSONInt = Field(10, ge=1, le=MAX_LIMIT)
    offset: Offset = 0
    query: str | None = None
    refresh_ttl: JSONBool | None = None


class StoreNamespaces(_Request):
    prefix: list[str] | None = None
    suffix: list[str] | None = None
    max_depth: Annotated[int, Field(ge=1, le=MAX_NAMESPACE_DEPTH), JSONNumber] | None = None
    limit: JSONInt = Field(100, ge=1, le=MAX_LIMIT)
    offset: Offset = 0


class StoreItem(BaseModel):
    namespace: list[str]
    key: str
    value: dict[str, Any]
    created_at: str
    updated_at: str


class SearchStoreItem(StoreItem):
    score: float | None  # null without a query


class SearchItemsResponse(BaseModel):
    items: list[SearchStoreItem]


class NamespacesResponse(BaseModel):
    namespaces: list[list[str]]


def _check_labels(labels: list[str], *, allow_wildcard: bool = False) -> tuple[str, ...]:
    for label in labels:
        if allow_wildcard and label == "*":
            continue
        if not label or "." in label:
            raise ValidationFailed(
                f"namespace: label {label!r} is invalid (labels are non-empty, without '.')"
            )
    return tuple(labels)


def _item_json(item: Item, *, with_score: bool) -> dict[str, Any]:
    result: dict[str, Any] = {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }
    if with_score:
        result["score"] = item.score if isinstance(item, SearchItem) else None
    return result


def _store(state: AppStateDep, tenant_id: str) -> Any:
    return state.store.for_tenant(tenant_id)


@router.put("/store/items", operation_id="put_store_item", status_code=204)
async def put_item(
    request: Request,
    body: StorePut,
) -> Response:
    state, principal = await caller(request)
    namespace = _check_labels(body.namespace)
    index: Any = body.index if body.index is not None else None
    await _store(state, principal.tenant_id).aput(
        namespace, body.key, body.value, index=index, ttl=body.ttl
    )
    return Response(status_code=204)


@router.get("/store/items", operation_id="get_store_item", response_model=StoreItem | None)
async def get_item(
    request: Request,
    namespace: str = Query("", description="labels joined with '.'"),
    key: str | None = Query(None),
    refresh_ttl: bool | None = Query(None),
) -> Response:
    state, principal = await caller(request)
    if key is None or key == "":
        raise InvalidInput("Key is required")
    labels = _check_labels(namespace.split(".")) if namespace else ()
    if not labels:
        raise ValidationFailed("namespace: at least one label is required")
    item = await _store(state, principal.tenant_id).aget(labels, key, refresh_ttl=refresh_ttl)
    return json_response(_item_json(item, with_score=False) if item is not None else None)


async def _serve_get_item(request: Request, _body: None) -> Response | None:
    query = request.query_params
    refresh = query.get("refresh_ttl")
    refresh_ttl = None if refresh is None else QUERY_BOOLS.get(refresh)
    if refresh is not None and refresh_ttl is None:
        return None  # a spelling FastAPI judges (or refuses)
    return await get_item(request, query.get("namespace", ""), query.get("key"), refresh_ttl)


# the busiest item routes skip FastAPI's generic handler (app/api/routing.py: ServedFirst)
serve_first(router, put_item, put_item, StorePut)
serve_first(router, get_item, _serve_get_item, None)


@router.delete("/store/items", operation_id="delete_store_item", status_code=204)
async def delete_item(body: StoreDelete, state: AppStateDep, principal: PrincipalDep) -> Response:
    await _store(state, principal.tenant_id).adelete(_check_labels(body.namespace), body.key)
    return Response(status_code=204)


@router.post(
    "/store/items/search", operation_id="search_store_items", response_model=SearchItemsResponse
)
async def search_items(
    request: Request,
    body: StoreSearch,
) -> Response:
    state, principal = await caller(request)
    items = await _store(state, principal.tenant_id).asearch(
        _check_labels(body.namespace_prefix),
        query=body.query,
        filter=body.filter,
        limit=body.limit,
        offset=body.offset,
        refresh_ttl=body.refresh_ttl,
    )
    # Encoded once by orjson: the namespace tuple as an array, the datetimes in the same ISO
    # 8601 form `_item_json` writes (orjson's default matches `datetime.isoformat`).
    return json_response(
        {
            "items": [
                {
                    "namespace": item.namespace,
                    "key": item.key,
                    "value": item.value,
                    "created_at": item.created_at,
                    "updated_at": item.updated_at,
                    "score": item.score if isinstance(item, SearchItem) else None,
                }
                for item in items
            ]
        }
    )


# served without FastAPI's generic handler (app/api/routing.py: ServedFirst): about 150
# Python calls, a tenth of a search's CPU (store_search throughput, bench/api_bench.py)
serve_first(router, search_items, search_items, StoreSearch)


@router.post(
    "/store/namespaces", operation_id="list_store_namespaces", response_model=NamespacesResponse
)
async def list_namespaces(
    body: StoreNamespaces, state: AppStateDep, principal: PrincipalDep
) -> dict[str, Any]:
    namespaces = await _store(state, principal.tenant_id).alist_namespaces(
        prefix=_check_labels(body.prefix, allow_wildcard=True) if body.prefix else None,
        suffix=_check_labels(body.suffix, allow_wildcard=True) if body.suffix else None,
        max_depth=body.max_depth,
        limit=body.limit,
        offset=body.offset,
    )
    return {"namespaces": [list(ns) for ns in namespaces]}
