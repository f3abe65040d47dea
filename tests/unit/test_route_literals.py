"""Routes on the app's own router refuse a path outside the literal text around their
template's parameters before matching it (app/api/routing.py `PrefixChecked`): every request
still reaches the route, path parameters and 405 candidate that the full match picks."""

from __future__ import annotations

import re
from typing import Any

from starlette.routing import BaseRoute, Match

from app.api.routing import PrefixChecked
from app.config import Settings
from app.main import create_app

METHODS = ("GET", "POST", "PATCH", "PUT", "DELETE", "HEAD", "OPTIONS")
VALUES = ("3f0b6c0e-0000-4000-8000-000000000000", "search", "count", "a/b", "x%2Fy")


def _sample_paths(routes: list[BaseRoute]) -> list[str]:
    """Each template with several values for its parameters, with and without a trailing
    slash and one more segment, and a few paths no template has."""
    paths = {"/", "/nothing", "/threads/", "/threads/count/", "/assistants/search/x", "/threadsx"}
    for route in routes:
        template = getattr(route, "path", None)
        if not template:
            continue
        for value in VALUES:
            concrete = re.sub(r"\{[^}]*\}", value, template)
            paths |= {concrete, concrete + "/", concrete.rstrip("/") + "/x", concrete[:-1]}
    return sorted(paths)


def _picked(routes: list[BaseRoute], scope: dict[str, Any]) -> tuple[str, int, Any] | None:
    """What Starlette's router picks: the first full match, else the first partial one."""
    partial = None
    for index, route in enumerate(routes):
        match, child = route.matches(dict(scope))
        if match is Match.FULL:
            return "full", index, child.get("path_params")
        if match is Match.PARTIAL and partial is None:
            partial = ("partial", index, child.get("path_params"))
    return partial


def test_the_literal_check_changes_no_route_picked() -> None:
    app = create_app(Settings(database_url="sqlite+aiosqlite:///:memory:"))
    routes = app.router.routes
    checked = [r for r in routes if isinstance(r, PrefixChecked) and r.literal_prefix is not None]
    assert len(checked) > 50  # the resource routers' routes and their served-first twins
    scopes = [
        {"type": "http", "method": method, "path": path, "root_path": ""}
        for path in _sample_paths(routes)
        for method in METHODS
    ]
    with_check = [_picked(routes, scope) for scope in scopes]
    refused = sum(route.refuses(scope) for route in checked for scope in scopes)

    saved = [(route, route.literal_prefix) for route in checked]
    for route in checked:
        route.literal_prefix = None  # the full match only
    try:
        full_only = [_picked(routes, scope) for scope in scopes]
    finally:
        for route, prefix in saved:
            route.literal_prefix = prefix

    assert with_check == full_only
    # the corpus reaches every checked template, and the checks do skip most full matches
    reached = {getattr(routes[p[1]], "path", None) for p in with_check if p and p[0] == "full"}
    assert {getattr(route, "path", None) for route in checked} <= reached
    assert refused > 0.8 * len(checked) * len(scopes)


def test_a_root_path_or_another_scope_type_leaves_the_full_match_to_decide() -> None:
    app = create_app(Settings(database_url="sqlite+aiosqlite:///:memory:"))
    route = next(
        r
        for r in app.router.routes
        if isinstance(r, PrefixChecked) and getattr(r, "path", None) == "/assistants/search"
    )
    assert (route.literal_prefix, route.literal_suffix) == ("/assistants/search", "")
    outside = {"type": "http", "method": "POST", "path": "/threads/search", "root_path": ""}
    assert route.refuses(outside)
    assert not route.refuses(outside | {"root_path": "/api"})
    assert not route.refuses(outside | {"type": "websocket"})
    inside = outside | {"path": "/assistants/search"}
    assert not route.refuses(inside)
    assert route.matches(inside)[0] is Match.FULL
