"""Error statuses become exceptions named for what happened, with the server's message."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fake_server import FakeServer, resolve

import graphkeep_client as gk
from graphkeep_client import (
    APIError,
    Conflict,
    Forbidden,
    GraphkeepError,
    InvalidInput,
    NotFound,
    ProtocolError,
    RateLimited,
    ServerError,
    Unauthorized,
)

T = "1f0c2d3e-4a5b-7c6d-8e9f-0a1b2c3d4e5f"


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, InvalidInput),
        (401, Unauthorized),
        (403, Forbidden),
        (404, NotFound),
        (409, Conflict),
        (413, APIError),
        (422, InvalidInput),
        (429, RateLimited),
        (500, ServerError),
        (501, ServerError),
    ],
)
async def test_status_maps_to_a_named_error_with_the_detail(
    status: int, cls: type[APIError], server: FakeServer, make_client: Any
) -> None:
    client = make_client(max_retries=0)
    server.on(
        "PATCH",
        f"/threads/{T}",
        httpx.Response(status, json={"detail": f"why {status}"}, headers={"x-request-id": "rq-1"}),
    )
    with pytest.raises(cls) as info:
        await resolve(client.threads.update(T, metadata={}))
    err = info.value
    assert type(err) is cls
    assert isinstance(err, GraphkeepError)
    assert (err.status, err.detail, err.request_id) == (status, f"why {status}", "rq-1")
    assert err.method == "PATCH" and err.url.endswith(f"/threads/{T}")
    assert str(err) == f"{status} why {status}"


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"message": "from message"}, "from message"),
        ({"error": "Key is required"}, "Key is required"),
        ({"detail": [{"loc": ["body", "limit"], "msg": "too big"}]}, "body.limit: too big"),
        ("plain text body", "plain text body"),
        (None, "Conflict"),
    ],
)
async def test_detail_is_read_from_every_server_body_shape(
    body: Any, detail: str, server: FakeServer, client: Any
) -> None:
    if body is None:
        reply = httpx.Response(409)
    elif isinstance(body, str):
        reply = httpx.Response(409, text=body)
    else:
        reply = httpx.Response(409, json=body)
    server.on("POST", "/threads", reply)
    with pytest.raises(Conflict) as info:
        await resolve(client.threads.create())
    assert info.value.detail == detail


async def test_an_unreadable_answer_is_a_protocol_error(server: FakeServer, client: Any) -> None:
    server.on("GET", f"/threads/{T}", httpx.Response(200, text="<html>"))
    with pytest.raises(ProtocolError, match="not JSON"):
        await resolve(client.threads.get(T))
    server.on("POST", "/threads/count", httpx.Response(200, json={"n": 1}))
    with pytest.raises(ProtocolError, match="integer"):
        await resolve(client.threads.count())


def test_the_documented_tree_matches_the_classes() -> None:
    """The tree drawn in _errors' docstring is the real hierarchy."""
    from graphkeep_client import _errors

    doc = _errors.__doc__ or ""
    for name in ("TransportError", "ProtocolError", "RunFailed", "APIError"):
        assert getattr(gk, name).__bases__ == (GraphkeepError,)
        assert name in doc
    for name in (
        "InvalidInput",
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "Conflict",
        "RateLimited",
        "ServerError",
    ):
        assert getattr(gk, name).__bases__ == (APIError,)
        assert name in doc
