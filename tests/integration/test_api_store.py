"""Store endpoints over HTTP on real storage."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.integration.apiclient import api_client


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(db_url) as c:
        yield c


async def put(client: httpx.AsyncClient, ns: list[str], key: str, value: dict, **kw) -> None:
    r = await client.put("/store/items", json={"namespace": ns, "key": key, "value": value, **kw})
    assert r.status_code == 204, r.text
    assert r.content == b""


async def test_put_get_delete_roundtrip(client: httpx.AsyncClient) -> None:
    await put(client, ["users", "u1"], "k1", {"a": 1})
    r = await client.get("/store/items", params={"namespace": "users.u1", "key": "k1"})
    assert r.status_code == 200
    item = r.json()
    assert set(item) == {"namespace", "key", "value", "created_at", "updated_at"}
    assert item["namespace"] == ["users", "u1"] and item["value"] == {"a": 1}
    assert item["created_at"].endswith("+00:00")
    await asyncio.sleep(0.01)
    await put(client, ["users", "u1"], "k1", {"a": 2})
    again = (await client.get("/store/items", params={"namespace": "users.u1", "key": "k1"})).json()
    assert again["value"] == {"a": 2}
    assert again["created_at"] == item["created_at"] and again["updated_at"] > item["updated_at"]
    r = await client.request(
        "DELETE", "/store/items", json={"namespace": ["users", "u1"], "key": "k1"}
    )
    assert r.status_code == 204
    r = await client.get("/store/items", params={"namespace": "users.u1", "key": "k1"})
    assert r.status_code == 200 and r.text == "null"  # missing item: null, not 404
    # deleting a missing item is fine
    r = await client.request(
        "DELETE", "/store/items", json={"namespace": ["users", "u1"], "key": "k1"}
    )
    assert r.status_code == 204


async def test_input_errors(client: httpx.AsyncClient) -> None:
    r = await client.get("/store/items", params={"namespace": "users.u1"})
    assert r.status_code == 400 and r.json()["detail"] == "Key is required"
    r = await client.get("/store/items", params={"namespace": "users..u1", "key": "k"})
    assert r.status_code == 422
    r = await client.get("/store/items", params={"key": "k"})
    assert r.status_code == 422
    for ns in ([], ["a.b"], [""]):
        r = await client.put("/store/items", json={"namespace": ns, "key": "k", "value": {}})
        assert r.status_code == 422, ns
        assert isinstance(r.json()["detail"], str)
    r = await client.put("/store/items", json={"namespace": ["a"], "key": "k", "value": [1]})
    assert r.status_code == 422
    r = await client.put(
        "/store/items", json={"namespace": ["a"], "key": "k", "value": {}, "ttl": -5}
    )
    assert r.status_code == 422
    r = await client.post("/store/items/search", json={"namespace_prefix": ["a.b"]})
    assert r.status_code == 422
    r = await client.post("/store/items/search", json={"namespace_prefix": [], "query": "hi"})
    assert r.status_code == 200  # no index: the query is ignored, as langgraph's stores do
    r = await client.post("/store/namespaces", json={"max_depth": 0})
    assert r.status_code == 422


async def test_search_filter_pagination_and_score(client: httpx.AsyncClient) -> None:
    for i in range(5):
        await put(
            client,
            ["docs", "team", f"n{i % 2}"],
            f"k{i}",
            {"i": i, "kind": "even" if i % 2 == 0 else "odd"},
        )
    await put(client, ["other"], "x", {"i": 99})
    r = await client.post("/store/items/search", json={"namespace_prefix": ["docs"], "limit": 10})
    items = r.json()["items"]
    assert len(items) == 5
    assert all(item["score"] is None for item in items)
    assert [item["key"] for item in items] == ["k4", "k3", "k2", "k1", "k0"]  # newest first
    r = await client.post(
        "/store/items/search", json={"namespace_prefix": ["docs"], "filter": {"kind": "odd"}}
    )
    assert {item["key"] for item in r.json()["items"]} == {"k1", "k3"}
    r = await client.post(
        "/store/items/search", json={"namespace_prefix": [], "filter": {"i": {"$gte": 3}}}
    )
    assert {item["key"] for item in r.json()["items"]} == {"k3", "k4", "x"}
    r = await client.post(
        "/store/items/search", json={"namespace_prefix": ["docs"], "limit": 2, "offset": 2}
    )
    assert [item["key"] for item in r.json()["items"]] == ["k2", "k1"]


async def test_namespaces(client: httpx.AsyncClient) -> None:
    await put(client, ["a", "b", "c"], "k", {})
    await put(client, ["a", "x", "c"], "k", {})
    await put(client, ["z"], "k", {})
    r = await client.post("/store/namespaces", json={})
    assert r.json() == {"namespaces": [["a", "b", "c"], ["a", "x", "c"], ["z"]]}
    r = await client.post("/store/namespaces", json={"prefix": ["a"], "max_depth": 1})
    assert r.json() == {"namespaces": [["a"]]}
    r = await client.post("/store/namespaces", json={"prefix": ["a", "*"], "suffix": ["c"]})
    assert len(r.json()["namespaces"]) == 2
    r = await client.post("/store/namespaces", json={"limit": 1, "offset": 1})
    assert r.json() == {"namespaces": [["a", "x", "c"]]}
