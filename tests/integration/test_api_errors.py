"""Bad input never gives a 500: body limit (413), malformed JSON and bad ids (422)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.integration.apiclient import api_client

LIMIT = 4096


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(db_url, max_body_bytes=LIMIT) as c:
        yield c


async def test_body_over_limit_is_413_by_header(client: httpx.AsyncClient) -> None:
    big = {"metadata": {"blob": "x" * (LIMIT + 10)}}
    r = await client.post("/threads", json=big)
    assert r.status_code == 413
    assert str(LIMIT) in r.json()["detail"]
    assert (await client.post("/threads/count", json={})).json() == 0  # nothing was created


async def test_streamed_body_over_limit_is_413(client: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked upload
        yield b'{"metadata": {"blob": "'
        for _ in range(10):
            yield b"y" * 1024
        yield b'"}}'

    r = await client.post(
        "/threads", content=chunks(), headers={"content-type": "application/json"}
    )
    assert r.status_code == 413 and isinstance(r.json()["detail"], str)


async def test_body_under_limit_passes(client: httpx.AsyncClient) -> None:
    r = await client.post("/threads", json={"metadata": {"blob": "x" * (LIMIT // 2)}})
    assert r.status_code == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/threads"),
        ("POST", "/threads/search"),
        ("POST", "/assistants"),
        ("POST", "/assistants/search"),
        ("PUT", "/store/items"),
        ("POST", "/store/items/search"),
    ],
)
async def test_malformed_json_is_422_with_string_detail(
    client: httpx.AsyncClient, method: str, path: str
) -> None:
    r = await client.request(
        method, path, content=b'{"a": ', headers={"content-type": "application/json"}
    )
    assert r.status_code == 422
    assert isinstance(r.json()["detail"], str) and "JSON" in r.json()["detail"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/threads/{}"),
        ("DELETE", "/threads/{}"),
        ("GET", "/threads/{}/state"),
        ("GET", "/threads/{}/history"),
        ("POST", "/threads/{}/copy"),
        ("GET", "/assistants/{}"),
        ("DELETE", "/assistants/{}"),
        ("GET", "/assistants/{}/schemas"),
    ],
)
async def test_ids_bad_is_422_unknown_is_404(
    client: httpx.AsyncClient, method: str, path: str
) -> None:
    r = await client.request(method, path.format("not-a-uuid"))
    assert r.status_code == 422 and isinstance(r.json()["detail"], str)
    r = await client.request(method, path.format(uuid.uuid4()))
    assert r.status_code == 404 and isinstance(r.json()["detail"], str)


async def test_unknown_fields_are_ignored(client: httpx.AsyncClient) -> None:
    r = await client.post("/threads", json={"metadata": {}, "brand_new_sdk_field": 1})
    assert r.status_code == 200
    r = await client.post("/threads/search", json={"extract": {"a": "values.x"}, "limit": 1})
    assert r.status_code == 200
