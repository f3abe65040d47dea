"""LeanRoute answers exactly as FastAPI's own handler does, and serves the hot routes.

The same app is asked twice: once as built (simple endpoints on the lean handler) and once
with a dependency override installed, which sends every request through FastAPI's standard
handler. Status and body must agree for good and bad requests alike.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from app.api import lean_route
from app.config import Settings
from app.main import create_app
from tests.conftest import truncate_all


def _never_used() -> None:
    """A dependency no route has: overriding it switches every route to FastAPI's handler."""


@pytest.fixture
async def app(db_url: str) -> AsyncIterator[FastAPI]:
    app = create_app(Settings(database_url=db_url, workers=0))
    async with app.router.lifespan_context(app):
        try:
            yield app
        finally:
            await truncate_all(app.state.graphkeep.engine)


async def _both(app: FastAPI, method: str, path: str, **kwargs: Any) -> list[httpx.Response]:
    answers = []
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gk") as client:
        for standard in (False, True):
            app.dependency_overrides = {_never_used: _never_used} if standard else {}
            answers.append(await client.request(method, path, **kwargs))
    app.dependency_overrides = {}
    return answers


JSON = {"content-type": "application/json"}
JSON_UTF8 = {"content-type": "application/json; charset=utf-8"}
BODIES: list[tuple[str, dict[str, Any]]] = [
    ("empty body", {"content": b"", "headers": JSON}),
    ("no content type", {"content": b'{"limit": 2}'}),
    ("text/plain", {"content": b'{"limit": 2}', "headers": {"content-type": "text/plain"}}),
    ("+json subtype", {"content": b"{}", "headers": {"content-type": "application/x+json"}}),
    ("json with charset", {"content": b"{}", "headers": JSON_UTF8}),
    ("not UTF-8", {"content": b"\xd9", "headers": JSON}),
    ("truncated JSON", {"content": b'{"a": ', "headers": JSON}),
    ("JSON null", {"content": b"null", "headers": JSON}),
    ("JSON array", {"content": b"[]", "headers": JSON}),
    ("wrong field type", {"json": {"limit": "many"}}),
    ("NaN", {"content": b'{"limit": NaN}', "headers": JSON}),
    ("unknown fields", {"json": {"nonsense": 1}}),
]  # fmt: skip


@pytest.mark.parametrize(("label", "request_kwargs"), BODIES, ids=[b[0] for b in BODIES])
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/threads/search"),
        ("POST", "/store/items/search"),
        ("POST", "/threads/{thread}/history"),
        ("POST", "/runs/cancel"),
    ],
)
async def test_bodies_answer_as_fastapi_does(
    app: FastAPI, method: str, path: str, label: str, request_kwargs: dict[str, Any]
) -> None:
    thread = (await _both(app, "POST", "/threads", json={}))[0].json()["thread_id"]
    lean, standard = await _both(app, method, path.format(thread=thread), **request_kwargs)
    assert lean.status_code < 500, (label, lean.text)
    assert (lean.status_code, lean.json()) == (standard.status_code, standard.json()), label


@pytest.mark.parametrize(
    "path",
    [
        "/threads/{thread}",
        "/threads/not-a-uuid",
        f"/threads/{uuid.uuid4()}",
        "/threads/{thread}/state?subgraphs=maybe",
        "/threads/{thread}/state?subgraphs=true",
        "/threads/{thread}/history?limit=-1",
        "/threads/{thread}/history?limit=2&before=",
        "/threads/{thread}/runs?limit=abc",
        "/threads/{thread}/runs?status=nope",
        "/threads/{thread}/runs?limit=2&offset=x",
        "/threads/{thread}/runs?limit=&offset=0",
        "/threads/{thread}/state?subgraphs=",
        "/threads/{thread}/state?subgraphs=1&subgraphs=no",
        "/threads/{thread}?include=ttl",
        "/threads/{thread}?include=",
        "/store/items?namespace=a.b&key=k&refresh_ttl=maybe",
        "/store/items?namespace=a.b&key=k&refresh_ttl=false",
        "/store/items?namespace=a.b&key=k",
        "/store/items?namespace=&key=k",
        "/store/items?key=k",
    ],
)
async def test_path_and_query_parameters_answer_as_fastapi_does(app: FastAPI, path: str) -> None:
    created = await _both(app, "POST", "/threads", json={"metadata": {"k": "v"}})
    thread = created[0].json()["thread_id"]
    lean, standard = await _both(app, "GET", path.format(thread=thread))
    assert lean.status_code < 500, lean.text
    assert (lean.status_code, lean.json()) == (standard.status_code, standard.json())


async def test_a_created_thread_has_the_same_shape_on_both_handlers(app: FastAPI) -> None:
    lean, standard = await _both(app, "POST", "/threads", json={"metadata": {"a": 1}})
    assert lean.status_code == standard.status_code == 200
    assert lean.headers["content-type"] == standard.headers["content-type"]
    one, other = lean.json(), standard.json()
    assert one.keys() == other.keys() and "ttl" not in one
    assert one["metadata"] == other["metadata"] == {"a": 1}


def test_the_hot_routes_are_lean_and_the_others_are_not() -> None:
    """A FastAPI upgrade that changed the hook would silently put every route back on the
    generic handler: this names the routes that must be lean."""
    app = create_app(Settings(database_url="sqlite+aiosqlite:///:memory:", workers=0))
    lean: set[tuple[str, str]] = set()
    routes = [route for route in app.routes if isinstance(route, APIRoute)]
    assert len(routes) > 50  # mounted flat on the app's own router (mount_flat)
    for route in routes:
        if _is_lean(route.app):
            lean |= {(method, route.path) for method in route.methods}
    for hot in [
        ("POST", "/threads"),
        ("GET", "/threads/{thread_id}/state"),
        ("POST", "/threads/{thread_id}/history"),
        ("POST", "/store/items/search"),
        ("PUT", "/store/items"),
        ("GET", "/store/items"),
        ("POST", "/threads/{thread_id}/runs/wait"),
        ("POST", "/runs/wait"),
    ]:
        assert hot in lean, hot
    # an endpoint FastAPI serializes (returns a model) keeps FastAPI's handler
    assert ("POST", "/threads/count") not in lean


def _is_lean(app: Any, depth: int = 0) -> bool:
    if depth > 8 or app is None:
        return False
    if getattr(app, "__qualname__", "").startswith(lean_route.lean_handler.__name__):
        return True
    for cell in getattr(app, "__closure__", None) or ():
        try:
            if _is_lean(cell.cell_contents, depth + 1):
                return True
        except ValueError:  # an empty cell
            continue
    return False
