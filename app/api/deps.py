"""Annotated dependency aliases read from the app's lifespan state."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.auth.principal import ANONYMOUS, Principal
from app.state import AppState


async def get_app_state(request: Request) -> AppState:
    # async on purpose: FastAPI runs a plain `def` dependency in its thread pool, a thread
    # hop on every request for one attribute read.
    state: AppState = request.app.state.graphkeep
    return state


async def get_principal(request: Request) -> Principal:
    """The caller. Auth modes other than `none` replace this resolver (app/api/auth.py)."""
    resolver = getattr(request.app.state, "resolve_principal", None)
    if resolver is None:
        return ANONYMOUS
    principal: Principal = await resolver(request)
    return principal


async def caller(request: Request) -> tuple[AppState, Principal]:
    """The app state and the caller, for the busiest routes, which take `request` instead
    of `AppStateDep` / `PrincipalDep`: FastAPI solves each declared dependency on every
    request (about 0.1 ms of CPU each, as much as a small query), and these two are one
    attribute read and one call. Same answers, same errors, same openapi.json."""
    return await get_app_state(request), await get_principal(request)


AppStateDep = Annotated[AppState, Depends(get_app_state)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
