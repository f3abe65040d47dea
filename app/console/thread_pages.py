"""The thread page: state, the checkpoint tree, diffs, fork / replay, runs, interrupts."""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import HTMLResponse

from app.auth.console_session import CONSOLE_PREFIX
from app.checkpoint.tree import tree_page
from app.console.pages import parse_json
from app.console.render import ConsoleRoute, PrincipalDep, app_state, form, page
from app.console.tree_layout import layout
from app.console.values import diff_values
from app.errors import InvalidInput, NotFound
from app.runs.schemas import RunCreate
from app.runs.thread_stream import StateUpdateEvents
from app.threads import state as thread_state
from app.threads.schemas import StateUpdate

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)
THREAD = f"{CONSOLE_PREFIX}/threads/{{thread_id}}"
TREE_PAGE = 200
RUNS_SHOWN = 20
EVENTS_SHOWN = 200
MAX_ID = 64


def _checkpoint_id(value: str | None, what: str = "checkpoint") -> str:
    if not value or len(value) > MAX_ID:
        raise InvalidInput(f"choose a {what}")
    return value


def _redirect(request: Request, url: str) -> Response:
    """After an action: htmx follows HX-Redirect, a plain form the 303."""
    if request.headers.get("hx-request"):
        return Response(status_code=204, headers={"HX-Redirect": url})
    return Response(status_code=303, headers={"location": url})


async def _state_at(
    request: Request, tenant_id: str, thread_id: str, checkpoint_id: str | None, ns: str = ""
) -> dict[str, Any]:
    ref = {"checkpoint_id": checkpoint_id, "checkpoint_ns": ns} if checkpoint_id else None
    return await thread_state.get_state(
        app_state(request).threads.storage, tenant_id=tenant_id, thread_id=thread_id, checkpoint=ref
    )


@router.get(THREAD)
async def thread_page(
    request: Request,
    principal: PrincipalDep,
    thread_id: str,
    new: str = Query("", max_length=MAX_ID),
) -> HTMLResponse:
    state = app_state(request)
    thread = await state.threads.get_thread(tenant_id=principal.tenant_id, thread_id=thread_id)
    current = await _state_at(request, principal.tenant_id, thread.thread_id, None)
    runs = await state.runs.list_runs(
        tenant_id=principal.tenant_id,
        thread_id=thread.thread_id,
        limit=RUNS_SHOWN,
        offset=0,
        status=None,
    )
    return page(
        request,
        "thread.html",
        principal,
        thread=thread,
        current=current,
        runs=[run.to_json(timing=True) for run in runs],
        highlight=new,
        head_id=(current.get("checkpoint") or {}).get("checkpoint_id"),
    )


@router.get(f"{THREAD}/tree")
async def tree(
    request: Request,
    principal: PrincipalDep,
    thread_id: str,
    before: str = Query("", max_length=MAX_ID),
    head: str = Query("", max_length=MAX_ID),
    new: str = Query("", max_length=MAX_ID),
) -> HTMLResponse:
    state = app_state(request)
    thread = await state.threads.get_thread(tenant_id=principal.tenant_id, thread_id=thread_id)
    found = await tree_page(
        state.engine,
        tenant_id=principal.tenant_id,
        thread_id=thread.thread_id,
        before=before or None,
        limit=TREE_PAGE,
    )
    return page(
        request,
        "partials/tree.html",
        principal,
        thread_id=thread.thread_id,
        namespaces=layout(found.nodes, head_id=head or None),
        next_before=found.next_before,
        head=head,
        highlight=new,
    )


@router.get(f"{THREAD}/checkpoints/{{checkpoint_id}}")
async def checkpoint_detail(
    request: Request,
    principal: PrincipalDep,
    thread_id: str,
    checkpoint_id: str,
    ns: str = Query("", max_length=255),
    parent: str = Query("", max_length=MAX_ID),
) -> HTMLResponse:
    snapshot = await _state_at(request, principal.tenant_id, thread_id, checkpoint_id, ns)
    # the writes that produced this checkpoint are the results of its parent's tasks
    producing: list[Any] = []
    if parent:
        with suppress(NotFound):
            before = await _state_at(request, principal.tenant_id, thread_id, parent, ns)
            producing = [t for t in before.get("tasks", []) if t.get("result") is not None]
    return page(
        request,
        "partials/checkpoint.html",
        principal,
        thread_id=thread_id,
        snapshot=snapshot,
        checkpoint_id=checkpoint_id,
        ns=ns,
        producing=producing,
        as_node=producing[0].get("name", "") if producing else "",
    )


@router.get(f"{THREAD}/diff")
async def diff(
    request: Request,
    principal: PrincipalDep,
    thread_id: str,
    a: str = Query(..., max_length=MAX_ID),
    b: str = Query(..., max_length=MAX_ID),
    ns: str = Query("", max_length=255),
) -> HTMLResponse:
    first, second = sorted([_checkpoint_id(a), _checkpoint_id(b)])
    older = await _state_at(request, principal.tenant_id, thread_id, first, ns)
    newer = await _state_at(request, principal.tenant_id, thread_id, second, ns)
    return page(
        request,
        "partials/diff.html",
        principal,
        a=first,
        b=second,
        changes=diff_values(older.get("values"), newer.get("values")),
    )


@router.post(f"{THREAD}/fork")
async def fork(request: Request, principal: PrincipalDep, thread_id: str) -> Response:
    """update_state at the chosen checkpoint, as the chosen node: a new branch."""
    fields = await form(request)
    checkpoint_id = _checkpoint_id(fields.get("checkpoint_id"))
    values = parse_json(fields.get("values", "") or "null", "the values")
    as_node = fields.get("as_node", "").strip() or None
    state = app_state(request)
    events = StateUpdateEvents(state.runs.hub, principal.tenant_id)
    result = await thread_state.update_state(
        state.threads.storage,
        tenant_id=principal.tenant_id,
        thread_id=thread_id,
        body=StateUpdate(values=values, as_node=as_node, checkpoint_id=checkpoint_id),
        on_change=events.record,
    )
    events.wake()
    return _redirect(request, f"{CONSOLE_PREFIX}/threads/{thread_id}?new={result.checkpoint_id}")


async def _graph_of(request: Request, tenant_id: str, thread_id: str) -> str:
    thread = await app_state(request).threads.get_thread(tenant_id=tenant_id, thread_id=thread_id)
    graph_id = thread.metadata.get("graph_id")
    if not isinstance(graph_id, str):
        raise InvalidInput("this thread has no graph yet")
    return graph_id


@router.post(f"{THREAD}/replay")
async def replay(request: Request, principal: PrincipalDep, thread_id: str) -> Response:
    """A run from the chosen checkpoint: the nodes after it execute again."""
    fields = await form(request)
    checkpoint_id = _checkpoint_id(fields.get("checkpoint_id"))
    graph_id = await _graph_of(request, principal.tenant_id, thread_id)
    await app_state(request).runs.create(
        principal=principal,
        thread_id=thread_id,
        payload=RunCreate(assistant_id=graph_id, checkpoint_id=checkpoint_id),
        headers={},
    )
    return _redirect(request, f"{CONSOLE_PREFIX}/threads/{thread_id}")


@router.post(f"{THREAD}/resume")
async def resume(request: Request, principal: PrincipalDep, thread_id: str) -> Response:
    """Answer the thread's interrupt: a run with Command(resume=<the JSON given>)."""
    fields = await form(request)
    value = parse_json(fields.get("resume", ""), "the answer")
    graph_id = await _graph_of(request, principal.tenant_id, thread_id)
    await app_state(request).runs.create(
        principal=principal,
        thread_id=thread_id,
        payload=RunCreate(assistant_id=graph_id, command={"resume": value}),
        headers={},
    )
    return _redirect(request, f"{CONSOLE_PREFIX}/threads/{thread_id}")


@router.post(f"{THREAD}/delete")
async def delete(request: Request, principal: PrincipalDep, thread_id: str) -> Response:
    """Delete the thread (its active runs are cancelled first, as the API does)."""
    fields = await form(request)
    if fields.get("confirm") != thread_id:
        raise InvalidInput("type the thread id to confirm the delete")
    state = app_state(request)
    thread = await state.threads.get_thread(tenant_id=principal.tenant_id, thread_id=thread_id)
    active = await state.threads.active_run_ids(
        tenant_id=principal.tenant_id, thread_id=thread.thread_id
    )
    if active:
        with suppress(NotFound):
            await state.runs.cancel_many(
                tenant_id=principal.tenant_id,
                thread_id=thread.thread_id,
                run_ids=active,
                status=None,
                action="interrupt",
            )
    await state.threads.delete_thread(tenant_id=principal.tenant_id, thread_id=thread.thread_id)
    return _redirect(request, CONSOLE_PREFIX)


@router.get(f"{THREAD}/runs")
async def runs_partial(request: Request, principal: PrincipalDep, thread_id: str) -> HTMLResponse:
    runs = await app_state(request).runs.list_runs(
        tenant_id=principal.tenant_id,
        thread_id=thread_id,
        limit=RUNS_SHOWN,
        offset=0,
        status=None,
    )
    shown = [run.to_json(timing=True) for run in runs]
    return page(request, "partials/runs.html", principal, runs=shown, thread_id=thread_id)


@router.get(f"{THREAD}/runs/{{run_id}}/events")
async def run_events(
    request: Request, principal: PrincipalDep, thread_id: str, run_id: str
) -> HTMLResponse:
    state = app_state(request)
    found = await state.runs.get(tenant_id=principal.tenant_id, thread_id=thread_id, run_id=run_id)
    run = found.to_json()
    events = await state.runs.hub.stored(run["run_id"], tenant_id=principal.tenant_id)
    return page(request, "partials/events.html", principal, run=run, events=events[:EVENTS_SHOWN])
