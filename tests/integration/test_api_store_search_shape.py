"""Store search items are written by the one JSON encoder in a single pass; they must read
exactly as the same item from GET /store/items (timestamps in the same ISO 8601 form)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.integration.apiclient import api_client


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(db_url) as c:
        yield c


async def test_search_item_matches_get_item(client: httpx.AsyncClient) -> None:
    value = {"text": "héllo", "n": 1.5, "nested": {"list": [1, None, True]}}
    r = await client.put("/store/items", json={"namespace": ["a", "b"], "key": "k", "value": value})
    assert r.status_code == 204, r.text
    got = (await client.get("/store/items", params={"namespace": "a.b", "key": "k"})).json()
    r = await client.post("/store/items/search", json={"namespace_prefix": ["a"]})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    (found,) = r.json()["items"]
    assert found.pop("score") is None
    assert found == got
    assert got["created_at"].endswith("+00:00") and got["value"] == value
