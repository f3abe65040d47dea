"""POST /store/items/search is served by a plain Starlette route placed before its documented
APIRoute (app/api/routing.py: ServedFirst). Every answer must be the one FastAPI's own
handler gives: the same requests go to the app with and without the fast route, and status,
body and content type must match; the route template still labels the request in the HTTP
metrics."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI

from app import metrics
from app.api.routing import ServedFirst

JSON = {"content-type": "application/json"}
REQUESTS: list[tuple[bytes, dict[str, str]]] = [
    (b'{"namespace_prefix": ["s"], "limit": 2}', JSON),
    (b'{"namespace_prefix": ["s"], "filter": {"n": {"$gte": 1}}, "offset": 1}', JSON),
    (b'{"namespace_prefix": ["s"], "limit": 3.0}', JSON),  # an integer to JSON Schema
    (b'{"namespace_prefix": ["s"], "limit": "3"}', JSON),  # a string for a number: 422
    (b'{"namespace_prefix": ["s"], "limit": "3"}', {}),  # no content type
    (b'{"namespace_prefix": ["s"]}', {"content-type": "application/vnd.x+json"}),
    (b'{"namespace_prefix": ["s"]}', {"content-type": "text/plain"}),
    (b'{"namespace_prefix": ["s"], "limit": 0}', JSON),  # invalid: 422
    (b'{"namespace_prefix": ["bad.label"]}', JSON),
    (b'{"namespace_prefix": ["s"], "filter": {"n": {"$nope": 1}}}', JSON),
    (b'{"namespace_prefix": ', JSON),  # malformed
    (b"[]", JSON),
    (b"null", JSON),
    (b"", JSON),  # no body
    (b"", {}),
]


async def _answers(app: FastAPI) -> list[tuple[int, str, Any]]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gk") as client:
        out = []
        for body, headers in REQUESTS:
            r = await client.post("/store/items/search", content=body, headers=headers)
            out.append((r.status_code, r.headers.get("content-type", ""), r.json()))
        return out


async def test_fast_route_answers_as_fastapi(app: FastAPI) -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gk") as client:
        for i in range(4):
            item = {"namespace": ["s", f"n{i % 2}"], "key": f"k{i}", "value": {"n": i}}
            assert (await client.put("/store/items", json=item)).status_code == 204
    routes = app.router.routes
    (fast,) = [r for r in routes if isinstance(r, ServedFirst) and r.path == "/store/items/search"]
    served = await _answers(app)
    position = routes.index(fast)
    routes.remove(fast)  # FastAPI's own handler (the documented APIRoute) answers alone
    try:
        expected = await _answers(app)
    finally:
        routes.insert(position, fast)
    assert served == expected
    statuses = [status for status, _, _ in served]
    assert statuses.count(200) >= 4 and 422 in statuses  # both paths exercised
    assert len(served[0][2]["items"]) == 2


async def test_fast_route_keeps_route_template_and_405(app: FastAPI) -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gk") as client:
        r = await client.post("/store/items/search", json={"namespace_prefix": ["s"]})
        assert r.status_code == 200, r.text
        exposed = metrics.render().decode()
        assert 'route="/store/items/search"' in exposed
        r = await client.get("/store/items/search")
        assert r.status_code == 405 and "POST" in r.headers["allow"]
