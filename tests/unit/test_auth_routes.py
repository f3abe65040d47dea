"""Every API route outside the public ones asks for the caller (and so for its tenant)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

from app.api.auth import METRICS_PATH, PUBLIC_PATHS
from app.auth.console_session import is_public_console_path
from app.config import Settings
from app.main import create_app


def _routes(routes: list[Any]) -> Iterator[Any]:
    for route in routes:
        yield route
        nested = getattr(route, "routes", None) or getattr(
            getattr(route, "original_router", None), "routes", None
        )
        if nested:
            yield from _routes(nested)


def _dependency_names(dependant: Any) -> set[str]:
    names: set[str] = set()
    for sub in dependant.dependencies:
        names.add(getattr(sub.call, "__name__", ""))
        names |= _dependency_names(sub)
    return names


def test_every_non_public_route_resolves_the_principal() -> None:
    app = create_app(Settings(database_url="sqlite+aiosqlite:///:memory:"))
    checked, missing = 0, []
    for route in _routes(app.router.routes):
        dependant = getattr(route, "dependant", None)
        if dependant is None or route.path in PUBLIC_PATHS | {METRICS_PATH}:
            continue
        if is_public_console_path(route.path):  # the console's sign-in form
            continue
        checked += 1
        if not hasattr(route, "methods"):  # a WebSocket: it resolves the caller itself
            if "resolve_principal" not in inspect.getsource(route.endpoint):
                missing.append(f"WEBSOCKET {route.path}")
            continue
        if "get_principal" in _dependency_names(dependant):
            continue
        # the busiest routes resolve the caller in their body (app/api/deps.py `caller`)
        if "await caller(request)" not in inspect.getsource(route.endpoint):
            missing.append(f"{sorted(route.methods)} {route.path}")
    assert checked >= 30, checked  # the resource routers are mounted
    assert not missing, f"routes that never ask who is calling: {missing}"
