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


AppStateDep = Annotated[AppState, Depends(get_app_state)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
