"""How the resource routers are built and put on the app (public FastAPI/Starlette API only)."""

from __future__ import annotations

import email.message
import functools
from collections.abc import Sequence

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from starlette.types import Message, Receive


def operation_id(route: APIRoute) -> str:
    """The openapi.json id of a route declared without `operation_id=`: its endpoint's name
    (FastAPI's default appends the path and method, which would change with either)."""
    return route.name


def resource_router(tag: str) -> APIRouter:
    """The router of one resource module: its tag, stable operation ids."""
    return APIRouter(tags=[tag], generate_unique_id_function=operation_id)


def mount_flat(app: FastAPI, routers: Sequence[APIRouter]) -> None:
    """Put the routers' routes on the app's own router, in order.

    `include_router` nests each router: every request is then matched against each route
    of each router before it, and again inside the one selected (two passes over some 20
    routes, about as much CPU as a small query). The routes were built by the routers
    already (tags, operation ids, handlers), so the app's router holds them directly; it
    matches its `routes` list as it is on each request (Starlette's Router).
    """
    for router in routers:
        app.router.routes.extend(router.routes)


@functools.lru_cache(maxsize=64)
def is_json_content_type(value: str) -> bool:
    """application/json or application/*+json, parsed as FastAPI parses it."""
    message = email.message.Message()
    message["content-type"] = value
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


def replaying(raw: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the app `raw` once, then the real messages (the disconnect)."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return await receive()

    return replay


async def read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None when the client went away first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)
