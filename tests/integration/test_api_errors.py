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
    marker = {"marker": str(uuid.uuid4())}
    big = {"metadata": {**marker, "blob": "x" * (LIMIT + 10)}}
    r = await client.post("/threads", json=big)
    assert r.status_code == 413
    assert str(LIMIT) in r.json()["detail"]
    # nothing was created: counted by the refused body's own marker (a count of all threads
    # once met 2 left in the worker's database by an earlier test)
    assert (await client.post("/threads/count", json={"metadata": marker})).json() == 0
    ok = await client.post("/threads", json={"metadata": marker})
    assert ok.status_code == 200  # the count would see one
    assert (await client.post("/threads/count", json={"metadata": marker})).json() == 1


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


JSON = {"content-type": "application/json"}
NOT_STORABLE = [
    pytest.param(b'{"metadata": {"a": NaN}}', "finite", id="NaN"),
    pytest.param(b'{"metadata": {"a": [1, -Infinity]}}', "finite", id="Infinity"),
    # storable JSON text but not storable text: the boundary check's 422 (issue 14)
    pytest.param(b'{"metadata": {"a": "x\\u0000y"}}', "NUL", id="NUL"),
]


@pytest.mark.parametrize(("body", "says"), NOT_STORABLE)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/threads"),
        ("PATCH", "/threads/{thread}"),
        ("POST", "/threads/search"),
        ("POST", "/threads/count"),
        ("POST", "/assistants"),
        ("POST", "/assistants/search"),
    ],
)
async def test_json_no_database_stores_is_400_not_500(
    client: httpx.AsyncClient, method: str, path: str, body: bytes, says: str
) -> None:
    """NaN / Infinity are not JSON and jsonb holds no NUL: refused as the caller's error on
    both dialects (they were 500s, or 503s from SQLite's JSON functions), nothing written."""
    thread = (await client.post("/threads", json={"metadata": {"keep": 1}})).json()["thread_id"]
    if path == "/assistants":
        body = body.replace(b"{", b'{"graph_id": "agent", ', 1)
    r = await client.request(method, path.format(thread=thread), content=body, headers=JSON)
    # refused at the boundary, searches and counts too (they were 200s matching nothing)
    assert r.status_code == (422 if says == "NUL" else 400), r.text
    assert says in r.json()["detail"]
    assert (await client.post("/threads/count", json={})).json() == 1
    assert (await client.get(f"/threads/{thread}")).json()["metadata"] == {"keep": 1}


async def test_a_literal_route_name_is_never_taken_for_an_id(client: httpx.AsyncClient) -> None:
    """`/threads/{t}/runs/crons` takes POST only: GET is 405 with that Allow, not the run
    route answering 422 for run id "crons"; ids in the same place still reach their route."""
    thread_id = (await client.post("/threads", json={})).json()["thread_id"]
    for method, path, allow in (
        ("GET", f"/threads/{thread_id}/runs/crons", "POST"),
        ("PATCH", "/threads/count", "POST"),
        ("DELETE", "/runs/crons/search", "POST"),
    ):
        r = await client.request(method, path)
        assert r.status_code == 405, (method, path, r.text)
        assert r.headers["allow"] == allow and r.json() == {"detail": "Method Not Allowed"}
    missing = await client.get(f"/threads/{thread_id}/runs/{uuid.uuid4()}")
    assert missing.status_code == 404
    crons = await client.post(f"/threads/{thread_id}/runs/crons", json={})
    assert crons.status_code == 422  # the cron route itself (no schedule)
