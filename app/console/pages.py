"""Console pages: overview, interrupts inbox, Store, assistants with a chat pane, sign-in."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse, StreamingResponse

from app.assistants import introspection
from app.assistants.schemas import AssistantSearch, AssistantVersionsSearch
from app.auth.console_session import CONSOLE_PREFIX, SESSION_COOKIE
from app.console.render import ConsoleRoute, PrincipalDep, app_state, error_page, form, page
from app.db.storable import UnstorableValue, json_problem
from app.errors import InvalidInput, Unauthorized
from app.runs.overview import runs_overview
from app.runs.schemas import RunCreate
from app.statuses import ThreadStatus
from app.store.stats import count_items
from app.threads.schemas import ThreadCreate, ThreadSearch

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)
PAGE_SIZE = 25
SORTS = ("updated_at", "created_at", "thread_id", "status")
STATUSES = tuple(status.value for status in ThreadStatus)
MAX_SEARCH = 500


def parse_metadata(text: str) -> dict[str, Any] | None:
    """`key=value, key2=value2` or a JSON object; None when empty."""
    text = text.strip()
    if not text:
        return None
    if len(text) > MAX_SEARCH:
        raise InvalidInput("the metadata filter is too long")
    if text.startswith("{"):
        parsed = parse_json(text, "the metadata filter")
        if not isinstance(parsed, dict):
            raise InvalidInput("the metadata filter must be a JSON object")
        return parsed
    out: dict[str, Any] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise InvalidInput("write the metadata filter as key=value, key2=value2")
        out[key.strip()] = value.strip()
    return out


def parse_json(text: str, what: str) -> Any:
    """A form field's JSON, checked as the API's boundary checks a body (app/db/storable.py):
    the standard parser keeps every integer exact (orjson turned one beyond 64 bits into a
    float), and what storage cannot hold is refused before anything is written."""
    try:
        value, problem = json_problem(text, what)
    except ValueError:
        raise InvalidInput(f"{what} is not valid JSON") from None
    if problem is not None:
        raise UnstorableValue(problem)
    return value


@router.get(CONSOLE_PREFIX)
async def overview(request: Request, principal: PrincipalDep) -> HTMLResponse:
    return page(request, "overview.html", principal, statuses=STATUSES, sorts=SORTS)


@router.get(f"{CONSOLE_PREFIX}/partials/stats")
async def stats(request: Request, principal: PrincipalDep) -> HTMLResponse:
    state = app_state(request)
    runs = await runs_overview(state.engine, tenant_id=principal.tenant_id)
    store_items = await count_items(state.engine, tenant_id=principal.tenant_id)
    return page(request, "partials/stats.html", principal, runs=runs, store_items=store_items)


@router.get(f"{CONSOLE_PREFIX}/partials/threads")
async def thread_list(
    request: Request,
    principal: PrincipalDep,
    status: str = Query("", max_length=32),
    graph: str = Query("", max_length=255),
    metadata: str = Query("", max_length=MAX_SEARCH),
    sort: str = Query("updated_at", max_length=32),
    order: str = Query("desc", max_length=4),
    page_no: int = Query(1, ge=1, le=100_000, alias="page"),
) -> HTMLResponse:
    meta = parse_metadata(metadata) or {}
    if graph.strip():
        meta["graph_id"] = graph.strip()
    if sort not in SORTS or order not in ("asc", "desc"):
        raise InvalidInput(f"sort by one of {', '.join(SORTS)}, asc or desc")
    body = ThreadSearch(
        metadata=meta or None,
        status=status or None,  # pydantic checks the literal
        limit=PAGE_SIZE,
        offset=(page_no - 1) * PAGE_SIZE,
        sort_by=sort,
        sort_order=order,
        select=["thread_id", "status", "metadata", "created_at", "updated_at"],
    )
    found = await app_state(request).threads.search_threads(
        tenant_id=principal.tenant_id, body=body
    )
    return page(
        request,
        "partials/threads.html",
        principal,
        threads=found.items,
        has_more=found.has_more,
        page_no=page_no,
    )


@router.get(f"{CONSOLE_PREFIX}/interrupts")
async def interrupts(request: Request, principal: PrincipalDep) -> HTMLResponse:
    body = ThreadSearch(status="interrupted", limit=50, sort_by="updated_at", sort_order="desc")
    found = await app_state(request).threads.search_threads(
        tenant_id=principal.tenant_id, body=body
    )
    # a thread paused by interrupt_before/after or a fork has no payload to answer
    waiting = [thread for thread in found.items if thread.get("interrupts")]
    return page(request, "interrupts.html", principal, threads=waiting)


def _labels(text: str) -> tuple[str, ...]:
    labels = tuple(part.strip() for part in text.split(".") if part.strip())
    if len(text) > MAX_SEARCH:
        raise InvalidInput("the namespace is too long")
    return labels


@router.get(f"{CONSOLE_PREFIX}/store")
async def store_page(
    request: Request,
    principal: PrincipalDep,
    prefix: str = Query("", max_length=MAX_SEARCH),
    query: str = Query("", max_length=MAX_SEARCH),
    filter_json: str = Query("", max_length=MAX_SEARCH, alias="filter"),
    page_no: int = Query(1, ge=1, le=10_000, alias="page"),
) -> HTMLResponse:
    store = app_state(request).store.for_tenant(principal.tenant_id)
    labels = _labels(prefix)
    item_filter = parse_json(filter_json, "the filter") if filter_json.strip() else None
    if item_filter is not None and not isinstance(item_filter, dict):
        raise InvalidInput("the filter must be a JSON object")
    namespaces = await store.alist_namespaces(
        prefix=labels or None, max_depth=len(labels) + 1, limit=100
    )
    items = await store.asearch(
        labels,
        query=query.strip() or None,
        filter=item_filter,
        limit=PAGE_SIZE + 1,
        offset=(page_no - 1) * PAGE_SIZE,
    )
    return page(
        request,
        "store.html",
        principal,
        ns_prefix=".".join(labels),
        crumbs=[".".join(labels[: i + 1]) for i in range(len(labels))],
        namespaces=[".".join(ns) for ns in namespaces],
        items=items[:PAGE_SIZE],
        has_more=len(items) > PAGE_SIZE,
        page_no=page_no,
        query=query,
        filter_json=filter_json,
        semantic=store.index is not None,
    )


@router.get(f"{CONSOLE_PREFIX}/assistants")
async def assistants_page(
    request: Request, principal: PrincipalDep, selected: str = Query("", max_length=255, alias="id")
) -> HTMLResponse:
    state = app_state(request)
    found = await state.assistants.search_assistants(
        tenant_id=principal.tenant_id,
        body=AssistantSearch(limit=100, sort_by="created_at", sort_order="asc"),
    )
    items = found.items
    current = next((a for a in items if a["assistant_id"] == selected), None) or (
        items[0] if items else None
    )
    drawing: dict[str, Any] | None = None
    versions: list[Any] = []
    if current is not None:
        drawing = await introspection.get_graph_drawing(
            state.assistants,
            tenant_id=principal.tenant_id,
            assistant_id=current["assistant_id"],
            xray=None,
            graphs=state.graphs,
        )
        versions = await state.assistants.list_versions(
            tenant_id=principal.tenant_id,
            assistant_id=current["assistant_id"],
            body=AssistantVersionsSearch(limit=20),
        )
    return page(
        request,
        "assistants.html",
        principal,
        assistants=items,
        current=current,
        drawing=drawing,
        layout=_graph_layout(drawing) if drawing else None,
        versions=versions,
    )


def _graph_layout(drawing: dict[str, Any]) -> dict[str, Any]:
    """Nodes in rows by their distance from __start__ (an SVG the page draws)."""
    nodes = [str(n["id"]) for n in drawing.get("nodes", [])]
    edges = [(str(e["source"]), str(e["target"])) for e in drawing.get("edges", [])]
    depth = {n: 0 for n in nodes if n == "__start__"} or ({nodes[0]: 0} if nodes else {})
    frontier = list(depth)
    while frontier:
        nxt = []
        for src, dst in edges:
            if src in frontier and dst not in depth:
                depth[dst] = depth[src] + 1
                nxt.append(dst)
        frontier = nxt
    for n in nodes:
        depth.setdefault(n, max(depth.values(), default=0) + 1)
    rows: dict[int, list[str]] = {}
    for n in nodes:
        rows.setdefault(depth[n], []).append(n)
    pos = {}
    for d, names in rows.items():
        for i, n in enumerate(names):
            pos[n] = (80 + i * 170, 30 + d * 80)
    width = 160 + 170 * max((len(v) for v in rows.values()), default=1)
    height = 60 + 80 * (max(rows, default=0) + 1)
    return {
        "nodes": [{"id": n, "x": pos[n][0], "y": pos[n][1]} for n in nodes],
        "edges": [
            {"x1": pos[s][0], "y1": pos[s][1], "x2": pos[t][0], "y2": pos[t][1]}
            for s, t in edges
            if s in pos and t in pos
        ],
        "width": width,
        "height": height,
    }


@router.post(f"{CONSOLE_PREFIX}/assistants/{{assistant_id}}/chat")
async def chat(request: Request, principal: PrincipalDep, assistant_id: str) -> HTMLResponse:
    """Start a run of the assistant with one user message on a new thread."""
    fields = await form(request)
    text = fields.get("message", "").strip()
    if not text:
        raise InvalidInput("write a message first")
    state = app_state(request)
    thread_id = fields.get("thread_id") or None
    if thread_id is None:
        thread = await state.threads.create_thread(
            tenant_id=principal.tenant_id, body=ThreadCreate()
        )
        thread_id = thread.thread_id
    run = await state.runs.create(
        principal=principal,
        thread_id=thread_id,
        payload=RunCreate(
            assistant_id=assistant_id,
            input={"messages": [{"role": "user", "content": text}]},
            stream_mode=["messages-tuple", "values"],
        ),
        headers={},
    )
    return page(
        request, "partials/chat_turn.html", principal, text=text, run=run, thread_id=thread_id
    )


@router.get(f"{CONSOLE_PREFIX}/runs/{{run_id}}/stream")
async def run_stream(request: Request, principal: PrincipalDep, run_id: str) -> StreamingResponse:
    """The run's stored and live events as SSE, for the chat pane's EventSource."""
    state = app_state(request)
    await state.runs.get(tenant_id=principal.tenant_id, thread_id=None, run_id=run_id)

    async def events() -> Any:
        stream = state.runs.stream(tenant_id=principal.tenant_id, run_id=run_id, after_seq=0)
        async for event in stream:
            if event is None:
                yield b": keep-alive\n\n"
                continue
            yield f"event: {event.event}\ndata: {event.data}\n\n".encode()
        yield b"event: end\ndata: null\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


@router.get(f"{CONSOLE_PREFIX}/login")
async def login_form(request: Request) -> HTMLResponse:
    return page(request, "login.html", None, error=None)


@router.post(f"{CONSOLE_PREFIX}/login")
async def login(request: Request) -> Response:
    fields = await form(request)
    token = fields.get("token", "").strip()
    authenticator = getattr(request.app.state, "authenticator", None)
    if authenticator is None or authenticator.mode == "none":
        return RedirectResponse(CONSOLE_PREFIX, status_code=303)
    try:
        if not token:
            raise Unauthorized("paste a token")
        from starlette.datastructures import Headers

        await authenticator.authenticate(
            Headers({"authorization": f"Bearer {token}"}), request.scope
        )
    except Unauthorized:
        return page(request, "login.html", None, status_code=401, error="that token is not valid")
    response = RedirectResponse(CONSOLE_PREFIX, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        token,
        path=CONSOLE_PREFIX,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",  # behind TLS the cookie never goes out in clear
    )
    return response


@router.post(f"{CONSOLE_PREFIX}/logout")
async def logout(request: Request, principal: PrincipalDep) -> Response:
    await form(request)  # a cross-site page cannot sign `principal` out
    response = RedirectResponse(f"{CONSOLE_PREFIX}/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path=CONSOLE_PREFIX, httponly=True, samesite="strict")
    return response


__all__ = ["error_page", "router"]
