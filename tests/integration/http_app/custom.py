"""A deployment's own FastAPI app (langgraph.json `http.app`) for the http options tests:
custom routes, one with a built-in's path, a pure-ASGI middleware and a lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

LIFESPAN = {"started": 0, "stopped": 0}
PRINCIPAL_KEY = "graphkeep.principal"


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    LIFESPAN["started"] += 1
    yield
    LIFESPAN["stopped"] += 1


class Stamp:
    """Marks every response, and says whether auth had run before it (middleware_order)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        saw = PRINCIPAL_KEY in scope.get("state", {})

        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = [(b"x-custom-mw", b"1"), (b"x-saw-principal", b"yes" if saw else b"no")]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, stamped)


app = FastAPI(lifespan=lifespan)
app.add_middleware(Stamp)


@app.get("/custom/hello")
async def hello(request: Request) -> dict[str, Any]:
    principal = request.scope.get("state", {}).get(PRINCIPAL_KEY)
    return {"hello": "world", "tenant": getattr(principal, "tenant_id", None)}


@app.get("/info")
async def info() -> dict[str, Any]:
    """Shadows the built-in /info: custom routes win (the official precedence)."""
    return {"custom": True}
