"""The server's Store honours GRAPHKEEP_STORE_MAX_VALUE_BYTES (413 over HTTP, nothing stored)."""

from __future__ import annotations

from tests.integration.apiclient import api_client


async def test_oversized_value_is_413_and_not_stored(db_url: str) -> None:
    async with api_client(db_url, store_max_value_bytes=2048) as client:
        item = {"namespace": ["users", "u1"], "key": "big"}
        r = await client.put("/store/items", json={**item, "value": {"blob": "x" * 3000}})
        assert r.status_code == 413, r.text
        assert "limit is 2048" in r.json()["detail"]
        got = await client.get("/store/items", params={"namespace": "users.u1", "key": "big"})
        assert got.status_code == 200 and got.json() is None
        ok = await client.put("/store/items", json={**item, "value": {"blob": "x" * 1000}})
        assert ok.status_code == 204, ok.text
