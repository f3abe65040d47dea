"""The busiest thread, state, Store, assistant and run routes are served by plain Starlette
routes placed before their documented APIRoutes (app/api/routing.py: ServedFirst). Every
answer must be the one FastAPI's own handler gives: the same requests go to the app with and
without those routes, and status, content type and body (ids and times aside) must match;
HEAD and other methods answer as before, and the route template still labels the request in
the HTTP metrics."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI

from app import metrics
from app.api.routing import ServedFirst

SERVED = {
    ("POST", "/threads"),
    ("GET", "/threads/{thread_id}"),
    ("POST", "/threads/{thread_id}/runs"),
    ("POST", "/threads/{thread_id}/runs/wait"),
    ("POST", "/threads/{thread_id}/runs/stream"),
    ("POST", "/runs"),
    ("POST", "/runs/wait"),
    ("POST", "/runs/stream"),
    ("GET", "/threads/{thread_id}/runs/{run_id}"),
    ("POST", "/threads/search"),
    ("POST", "/assistants/search"),
    ("GET", "/assistants/{assistant_id}"),
    ("POST", "/threads/count"),
    ("PATCH", "/threads/{thread_id}"),
    ("GET", "/threads/{thread_id}/state"),
    ("POST", "/threads/{thread_id}/history"),
    ("GET", "/store/items"),
    ("PUT", "/store/items"),
}
JSON = {"content-type": "application/json"}
RUN = b'{"assistant_id": "agent", "input": {"messages": []}}'
VOLATILE = {"thread_id", "run_id", "created_at", "updated_at", "state_updated_at", "expires_at"}


def _stable(value: Any) -> Any:
    """`value` with generated ids and times masked (they differ between two creates)."""
    if isinstance(value, dict):
        return {k: "*" if k in VOLATILE else _stable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


async def _answers(
    app: FastAPI, thread_id: str, run_id: str, assistant_id: str, state_id: str
) -> list[tuple[Any, ...]]:
    run = {"assistant_id": "agent", "input": {"messages": []}}
    state = f"/threads/{state_id}/state"
    history = f"/threads/{state_id}/history"
    item = "/store/items?namespace=served.first&key=k"
    put = b'{"namespace": ["served", "first"], "key": "k", "value": {"v": 1}}'
    requests: list[tuple[str, str, bytes | None, dict[str, str]]] = [
        ("POST", "/threads", b"{}", JSON),
        ("POST", "/threads", b'{"metadata": {"a": 1}, "ttl": {"ttl": 5}}', JSON),
        ("POST", "/threads", b'{"metadata": "x"}', JSON),  # invalid: 422
        ("POST", "/threads", b"{}", {}),  # no content type
        ("POST", "/threads", b"{}", {"content-type": "text/plain"}),
        ("POST", "/threads", b'{"metadata": ', JSON),  # malformed
        ("POST", "/threads", b"", JSON),  # no body
        ("POST", "/threads", b"null", JSON),
        ("POST", "/threads", f'{{"thread_id": "{thread_id}"}}'.encode(), JSON),  # 409
        (
            "POST",
            "/threads",
            f'{{"thread_id": "{thread_id}", "if_exists": "do_nothing"}}'.encode(),
            JSON,
        ),
        ("GET", f"/threads/{thread_id}", None, {}),
        ("GET", f"/threads/{thread_id}?include=ttl", None, {}),
        ("GET", f"/threads/{thread_id}?include=x&include=ttl", None, {}),
        ("GET", "/threads/not-a-uuid", None, {}),
        ("GET", "/threads/00000000-0000-0000-0000-000000000000", None, {}),
        ("HEAD", f"/threads/{thread_id}", None, {}),
        ("PUT", f"/threads/{thread_id}", b"{}", JSON),  # 405
        ("GET", f"/threads/{thread_id}/runs/{run_id}", None, {}),
        ("GET", f"/threads/{thread_id}/runs/00000000-0000-0000-0000-000000000000", None, {}),
        ("GET", f"/threads/{thread_id}/runs/nope", None, {}),
        ("POST", f"/threads/{thread_id}/runs", b'{"input": {}}', JSON),  # no assistant: 422
        ("POST", f"/threads/{thread_id}/runs", b'{"assistant_id": "nope"}', JSON),  # 404
        ("POST", "/threads/00000000-0000-0000-0000-000000000000/runs", b"{}", {}),
        # (pages that the first pass's creates cannot change: the oldest thread, or none)
        (
            "POST",
            "/threads/search",
            b'{"limit": 1, "sort_by": "created_at", "sort_order": "asc"}',
            JSON,
        ),
        ("POST", "/threads/search", b'{"metadata": {"absent": 1}, "status": "idle"}', JSON),
        ("POST", "/threads/search", b'{"limit": -1}', JSON),  # 422
        ("POST", "/threads/search", b'{"sort_by": "nope", "metadata": {"absent": 1}}', JSON),
        (
            "POST",
            "/threads/search",
            b'{"select": ["thread_id", "nope"], "metadata": {"absent": 1}}',
            JSON,
        ),
        # (this app has no workers: a wait or stream that was answered would never end; the
        # served ones end in the served wrapper all creates share, as POST /runs below)
        ("POST", "/runs/wait", b'{"assistant_id": "agent", "stream_mode": "nope"}', JSON),
        ("POST", "/runs/stream", b'{"input": {}}', JSON),  # no assistant: 422
        ("POST", "/runs", b'{"assistant_id": "agent", "input": {"messages": []}}', JSON),
        ("POST", "/runs", b'{"assistant_id": "nope"}', JSON),  # 404
        ("POST", "/runs", b"{", JSON),  # malformed
        ("POST", f"/threads/{thread_id}/runs/wait", b'{"assistant_id": 7}', JSON),  # 422
        ("POST", f"/threads/{thread_id}/runs/stream", b"{}", {}),  # no content type
        ("POST", "/threads/00000000-0000-0000-0000-000000000000/runs/wait", RUN, JSON),  # 404
        ("POST", "/threads/00000000-0000-0000-0000-000000000000/runs/stream", RUN, JSON),
        ("GET", "/runs/wait", None, {}),  # 405
        ("POST", "/threads/search", b"", JSON),  # no body
        ("POST", "/threads/search", b'{"metadata": {"absent": 1}}', {}),  # no content type
        ("POST", "/assistants/search", b"{}", JSON),
        ("POST", "/assistants/search", b'{"graph_id": "agent", "limit": 1}', JSON),
        ("POST", "/assistants/search", b'{"graph_id": "nope"}', JSON),
        ("POST", "/assistants/search", b'{"select": ["assistant_id", "graph_id"]}', JSON),
        ("POST", "/assistants/search", b'{"offset": -5}', JSON),  # 422
        ("POST", "/assistants/search", b'{"limit": ', JSON),  # malformed
        ("POST", "/assistants/search", b"[]", JSON),
        ("GET", f"/assistants/{assistant_id}", None, {}),
        ("GET", "/assistants/agent", None, {}),
        ("GET", f"/assistants/{thread_id}", None, {}),  # no such assistant: 404
        ("GET", "/assistants/not-a-uuid", None, {}),
        ("HEAD", f"/assistants/{assistant_id}", None, {}),
        ("DELETE", "/assistants/search", None, {}),
        # the state, history, count, patch and Store item routes; a boolean query value in
        # a spelling other than QUERY_BOOLS' is the documented route's to judge (accepted
        # or 422), as are bodies that do not validate
        ("GET", state, None, {}),
        ("GET", f"{state}?subgraphs=false", None, {}),
        ("GET", f"{state}?subgraphs=1&select=values,next", None, {}),
        ("GET", f"{state}?select=values&select=checkpoint", None, {}),
        ("GET", f"{state}?subgraphs=yes", None, {}),  # pydantic's: served by FastAPI
        ("GET", f"{state}?subgraphs=maybe", None, {}),  # 422
        ("GET", f"{state}?subgraphs=", None, {}),  # 422
        ("GET", f"{state}?select=nope", None, {}),
        ("GET", "/threads/00000000-0000-0000-0000-000000000000/state", None, {}),  # 404
        ("GET", "/threads/not-a-uuid/state", None, {}),
        ("HEAD", state, None, {}),
        ("POST", history, b"{}", JSON),
        ("POST", history, b'{"limit": 5, "select": ["values"]}', JSON),
        ("POST", history, b'{"limit": 0}', JSON),  # 422
        ("POST", history, b'{"limit": "5"}', JSON),  # 422: a string is not an integer
        ("POST", history, b"{}", {}),  # no content type
        ("POST", "/threads/00000000-0000-0000-0000-000000000000/history", b"{}", JSON),
        ("POST", "/threads/count", b'{"metadata": {"absent": 1}}', JSON),
        ("POST", "/threads/count", b'{"status": "nope"}', JSON),  # 422
        ("POST", "/threads/count", b"[", JSON),  # malformed
        ("PATCH", f"/threads/{state_id}", b'{"metadata": {"patched": 1}}', JSON),
        ("PATCH", f"/threads/{state_id}", b"{}", {**JSON, "prefer": "return=minimal"}),
        ("PATCH", f"/threads/{state_id}", b'{"metadata": 5}', JSON),  # 422
        ("PATCH", "/threads/00000000-0000-0000-0000-000000000000", b"{}", JSON),  # 404
        ("PUT", "/store/items", put, JSON),
        ("PUT", "/store/items", b'{"namespace": [], "key": "k", "value": {}}', JSON),  # 422
        ("PUT", "/store/items", b'{"namespace": ["a.b"], "key": "k", "value": {}}', JSON),
        ("GET", item, None, {}),
        ("GET", f"{item}&refresh_ttl=true", None, {}),
        ("GET", f"{item}&refresh_ttl=0", None, {}),
        ("GET", f"{item}&refresh_ttl=off", None, {}),  # pydantic's: served by FastAPI
        ("GET", f"{item}&refresh_ttl=nope", None, {}),  # 422
        ("GET", "/store/items?namespace=served.first", None, {}),  # no key
        ("GET", "/store/items?key=k", None, {}),  # no namespace
        ("GET", "/store/items?namespace=served.first&key=absent", None, {}),
        ("DELETE", "/store/items", b'{"namespace": ["served", "first"], "key": "x"}', JSON),
    ]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gk") as client:
        # a run on a fresh thread each time (a second one would meet the pending first)
        fresh = (await client.post("/threads", json={})).json()["thread_id"]
        r = await client.post(f"/threads/{fresh}/runs", json=run)
        out: list[tuple[Any, ...]] = [
            (r.status_code, r.headers.get("content-type"), _stable(r.json()))
        ]
        for method, url, body, headers in requests:
            r = await client.request(method, url, content=body, headers=headers)
            payload = r.json() if r.content else None
            out.append(
                (method, url, r.status_code, r.headers.get("content-type"), _stable(payload))
            )
        return out


async def test_served_routes_answer_as_fastapi(app: FastAPI) -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gk") as client:
        thread_id = (await client.post("/threads", json={})).json()["thread_id"]
        run = {"assistant_id": "agent", "input": {"messages": []}}
        r = await client.post(f"/threads/{thread_id}/runs", json=run)
        assert r.status_code == 200, r.text
        run_id = r.json()["run_id"]
        found = await client.post("/assistants/search", json={"graph_id": "agent"})
        assistant_id = found.json()[0]["assistant_id"]
        graph = {"metadata": {"graph_id": "agent"}}
        state_id = (await client.post("/threads", json=graph)).json()["thread_id"]
        update = {"values": {"messages": [{"type": "human", "content": "hi"}]}}
        r = await client.post(f"/threads/{state_id}/state", json=update)
        assert r.status_code == 200, r.text
    routes = app.router.routes
    fast = [r for r in routes if isinstance(r, ServedFirst) and r.path != "/store/items/search"]
    assert {(m, r.path) for r in fast for m in r.methods or ()} == SERVED
    served = await _answers(app, thread_id, run_id, assistant_id, state_id)
    positions = [(routes.index(r), r) for r in fast]
    for _, route in positions:
        routes.remove(route)  # FastAPI's own handlers (the documented APIRoutes) answer alone
    try:
        expected = await _answers(app, thread_id, run_id, assistant_id, state_id)
    finally:
        for position, route in positions:
            routes.insert(position, route)
    assert served == expected
    statuses = {answer[2] for answer in served[1:]}
    assert {200, 204, 404, 405, 409, 422} <= statuses  # the served and the handed-over paths
    answers = {(a[0], a[1]): a for a in served[1:]}
    state = f"/threads/{state_id}/state"
    assert answers["GET", f"{state}?subgraphs=yes"][2] == 200
    assert answers["GET", f"{state}?subgraphs=maybe"][2] == 422
    assert answers["GET", state][4]["values"]["messages"][0]["content"] == "hi"


async def test_served_routes_keep_route_templates(app: FastAPI) -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gk") as client:
        thread_id = (await client.post("/threads", json={})).json()["thread_id"]
        assert (await client.get(f"/threads/{thread_id}")).status_code == 200
        exposed = metrics.render().decode()
        assert 'route="/threads/{thread_id}"' in exposed
        assert 'route="/threads"' in exposed
