"""Threads over HTTP on real storage: CRUD, search, count, copy, prune, delete cascade."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest
from sqlalchemy import func, insert, select

from app.db.tables import checkpoints, runs
from tests.integration.apiclient import api_client


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(db_url) as c:
        yield c


def app_state(client: httpx.AsyncClient):
    return client._transport.app.state.graphkeep  # type: ignore[attr-defined]


async def new_thread(client: httpx.AsyncClient, **body) -> dict:
    r = await client.post("/threads", json=body)
    assert r.status_code == 200, r.text
    return r.json()


async def add_checkpoint(client: httpx.AsyncClient, thread_id: str, request: str) -> dict:
    r = await client.post(
        f"/threads/{thread_id}/state", json={"values": {"request": request}, "as_node": "propose"}
    )
    assert r.status_code == 200, r.text
    return r.json()["checkpoint"]


async def count_rows(client: httpx.AsyncClient, table, thread_id: str) -> int:
    async with app_state(client).engine.connect() as conn:
        stmt = select(func.count()).select_from(table).where(table.c.thread_id == thread_id)
        return int((await conn.execute(stmt)).scalar_one())


async def insert_run(client: httpx.AsyncClient, thread_id: str, status: str = "pending") -> str:
    run_id = str(uuid.uuid4())
    now = datetime.now(UTC)
    async with app_state(client).engine.begin() as conn:
        await conn.execute(
            insert(runs).values(
                run_id=run_id,
                tenant_id="default",
                thread_id=thread_id,
                assistant_id=str(uuid.uuid4()),
                graph_id="approval",
                status=status,
                metadata={},
                kwargs={},
                multitask_strategy="reject",
                created_at=now,
                updated_at=now,
                available_at=now,
            )
        )
    return run_id


async def test_create_shapes_and_uuid7(client: httpx.AsyncClient) -> None:
    t = await new_thread(client, metadata={"graph_id": "agent", "k": 1})
    assert uuid.UUID(t["thread_id"]).version == 7
    assert t["status"] == "idle" and t["values"] is None and t["interrupts"] == {}
    assert t["config"] == {} and t["metadata"] == {"graph_id": "agent", "k": 1}
    assert t["created_at"].endswith("+00:00") and "ttl" not in t
    r = await client.get(f"/threads/{t['thread_id']}")
    assert r.status_code == 200 and r.json() == t


async def test_create_with_id_and_if_exists(client: httpx.AsyncClient) -> None:
    tid = str(uuid.uuid4())
    t = await new_thread(client, thread_id=tid, metadata={"a": 1})
    assert t["thread_id"] == tid
    r = await client.post("/threads", json={"thread_id": tid})
    assert r.status_code == 409 and isinstance(r.json()["detail"], str)
    r = await client.post("/threads", json={"thread_id": tid, "if_exists": "do_nothing"})
    assert r.status_code == 200 and r.json()["metadata"] == {"a": 1}
    r = await client.post("/threads", json={"thread_id": "not-a-uuid"})
    assert r.status_code == 422
    r = await client.post("/threads", json={"if_exists": "explode"})
    assert r.status_code == 422


async def test_ttl_is_stored_and_shown_with_include(client: httpx.AsyncClient) -> None:
    t = await new_thread(client, ttl={"ttl": 30, "strategy": "keep_latest"})
    r = await client.get(f"/threads/{t['thread_id']}", params={"include": "ttl"})
    ttl = r.json()["ttl"]
    assert ttl["strategy"] == "keep_latest" and ttl["ttl_minutes"] == 30
    expires = datetime.fromisoformat(ttl["expires_at"])
    assert 29 * 60 < (expires - datetime.now(UTC)).total_seconds() <= 30 * 60
    r = await client.post("/threads", json={"ttl": {"ttl": -1}})
    assert r.status_code == 422


async def test_patch_merges_metadata_and_prefer_minimal(client: httpx.AsyncClient) -> None:
    t = await new_thread(client, metadata={"a": 1, "b": 1})
    tid = t["thread_id"]
    r = await client.patch(f"/threads/{tid}", json={"metadata": {"b": 2, "c": 3}})
    assert r.status_code == 200 and r.json()["metadata"] == {"a": 1, "b": 2, "c": 3}
    assert r.json()["updated_at"] >= t["updated_at"]
    r = await client.patch(
        f"/threads/{tid}", json={"metadata": {"d": 4}}, headers={"Prefer": "return=minimal"}
    )
    assert r.status_code == 204 and r.content == b""
    assert (await client.get(f"/threads/{tid}")).json()["metadata"]["d"] == 4
    assert (
        await client.patch(f"/threads/{uuid.uuid4()}", json={"metadata": {}})
    ).status_code == 404
    assert (await client.patch("/threads/xyz", json={"metadata": {}})).status_code == 422


async def test_patch_merge_is_shallow_and_keeps_nulls(client: httpx.AsyncClient) -> None:
    """Top-level keys replace (a nested object is not merged into), a null is stored, not
    a deletion, on both dialects; a patch with a TTL and one without any metadata work too."""
    t = await new_thread(client, metadata={"nested": {"x": 1, "y": 2}, "keep": "k", "n": 1})
    tid = t["thread_id"]
    r = await client.patch(f"/threads/{tid}", json={"metadata": {"nested": {"x": 9}, "n": None}})
    assert r.json()["metadata"] == {"nested": {"x": 9}, "keep": "k", "n": None}
    r = await client.patch(f"/threads/{tid}", json={})
    assert r.status_code == 200 and r.json()["metadata"]["keep"] == "k"
    assert r.json()["updated_at"] > t["updated_at"]
    r = await client.patch(f"/threads/{tid}", json={"metadata": {"t": 1}, "ttl": {"ttl": 60}})
    assert r.status_code == 200 and r.json()["metadata"]["t"] == 1
    got = (await client.get(f"/threads/{tid}", params={"include": "ttl"})).json()
    assert got["metadata"]["n"] is None and got["ttl"]["ttl_minutes"] == 60


async def test_delete_cascades_to_runs_and_checkpoints(client: httpx.AsyncClient) -> None:
    t = await new_thread(client, metadata={"graph_id": "approval"})
    tid = t["thread_id"]
    await add_checkpoint(client, tid, "x")
    await insert_run(client, tid, status="success")
    assert await count_rows(client, checkpoints, tid) == 1
    assert await count_rows(client, runs, tid) == 1
    r = await client.delete(f"/threads/{tid}")
    assert r.status_code == 204
    assert await count_rows(client, checkpoints, tid) == 0
    assert await count_rows(client, runs, tid) == 0
    assert (await client.get(f"/threads/{tid}")).status_code == 404
    assert (await client.delete(f"/threads/{tid}")).status_code == 404
    assert (await client.delete("/threads/1234")).status_code == 422


async def test_search_filters(client: httpx.AsyncClient) -> None:
    a = await new_thread(client, metadata={"user": "u1", "tags": ["x", "y"], "n": 1})
    b = await new_thread(client, metadata={"user": "u2", "nested": {"deep": {"k": True}}})
    c = await new_thread(client, metadata={"graph_id": "approval", "user": "u1"})
    await add_checkpoint(client, c["thread_id"], "deploy")  # values cache + interrupted status

    async def ids(body: dict) -> list[str]:
        r = await client.post("/threads/search", json=body)
        assert r.status_code == 200, r.text
        return [t["thread_id"] for t in r.json()]

    assert set(await ids({"metadata": {"user": "u1"}})) == {a["thread_id"], c["thread_id"]}
    assert await ids({"metadata": {"tags": ["y"]}}) == [a["thread_id"]]
    assert await ids({"metadata": {"tags": ["z"]}}) == []
    assert await ids({"metadata": {"n": True}}) == []  # 1 is not true
    assert await ids({"metadata": {"nested": {"deep": {"k": True}}}}) == [b["thread_id"]]
    assert await ids({"values": {"request": "deploy"}}) == [c["thread_id"]]
    assert await ids({"values": {"request": "other"}}) == []
    assert await ids({"status": "interrupted"}) == [c["thread_id"]]
    assert set(await ids({"status": "idle"})) == {a["thread_id"], b["thread_id"]}
    assert await ids({"ids": [b["thread_id"], str(uuid.uuid4())]}) == [b["thread_id"]]
    assert (await client.post("/threads/search", json={"ids": ["bad"]})).status_code == 422
    assert (await client.post("/threads/search", json={"status": "weird"})).status_code == 422


async def test_search_sort_pagination_select(client: httpx.AsyncClient) -> None:
    created = [(await new_thread(client, metadata={"i": i}))["thread_id"] for i in range(5)]
    r = await client.post("/threads/search", json={"limit": 2})
    assert [t["thread_id"] for t in r.json()] == created[::-1][:2]  # created_at desc
    assert r.headers["x-pagination-next"] == "2" and r.headers["x-pagination-total"] == "3"
    r = await client.post(
        "/threads/search",
        json={"limit": 2, "offset": 4, "sort_by": "thread_id", "sort_order": "asc"},
    )
    assert [t["thread_id"] for t in r.json()] == sorted(created)[4:]
    assert "x-pagination-next" not in r.headers and r.headers["x-pagination-total"] == "5"
    r = await client.post("/threads/search", json={"select": ["thread_id", "status"]})
    assert all(set(t) == {"thread_id", "status"} for t in r.json())
    r = await client.post("/threads/search", json={"select": ["thread_id", "secret"]})
    assert r.status_code == 422 and "allowed" in r.json()["detail"]
    assert (await client.post("/threads/search", json={"limit": 0})).status_code == 422
    assert (await client.post("/threads/search", json={"offset": -1})).status_code == 422


async def test_count(client: httpx.AsyncClient) -> None:
    await new_thread(client, metadata={"x": 1})
    await new_thread(client, metadata={"x": 2})
    assert (await client.post("/threads/count", json={})).json() == 2
    assert (await client.post("/threads/count", json={"metadata": {"x": 2}})).json() == 1
    assert (await client.post("/threads/count", json={"status": "busy"})).json() == 0


async def test_search_and_count_combine_filters_and_sorts(client: httpx.AsyncClient) -> None:
    """Every filter shape at once, each sort order (PostgreSQL compiles one statement per
    shape and binds the values: a second search of the same shape must not reuse the first's
    values)."""
    a = await new_thread(client, metadata={"graph_id": "approval", "team": "t1"})
    b = await new_thread(client, metadata={"graph_id": "approval", "team": "t2"})
    await new_thread(client, metadata={"team": "t1"})
    await add_checkpoint(client, a["thread_id"], "ship")
    await add_checkpoint(client, b["thread_id"], "ship")
    both = {"metadata": {"graph_id": "approval"}, "values": {"request": "ship"}}

    async def ids(body: dict) -> list[str]:
        r = await client.post("/threads/search", json=body)
        assert r.status_code == 200, r.text
        return [t["thread_id"] for t in r.json()]

    full = both | {"status": "interrupted"}
    assert set(await ids(full)) == {a["thread_id"], b["thread_id"]}
    assert await ids(full | {"metadata": {"team": "t2"}}) == [b["thread_id"]]
    assert await ids(full | {"metadata": {"team": "t3"}}) == []
    assert await ids(both | {"status": "idle"}) == []
    # a's state changed first
    by_update = [a["thread_id"], b["thread_id"]]
    assert await ids(both | {"sort_by": "updated_at", "sort_order": "asc"}) == by_update
    assert await ids(both | {"sort_by": "updated_at", "sort_order": "DESC"}) == by_update[::-1]
    newest_first = await ids(both | {"sort_by": "created_at", "sort_order": "desc"})
    assert newest_first == [b["thread_id"], a["thread_id"]]
    assert await ids(both | {"sort_by": "nonsense"}) == newest_first  # created_at, as before
    assert await ids(both | {"limit": 1, "offset": 1}) == [a["thread_id"]]
    count = client.post
    assert (await count("/threads/count", json=full)).json() == 2
    assert (await count("/threads/count", json=full | {"metadata": {"team": "t1"}})).json() == 1
    assert (await count("/threads/count", json={"values": {"request": "none"}})).json() == 0


async def test_copy_keeps_checkpoints_and_cache(client: httpx.AsyncClient) -> None:
    t = await new_thread(client, metadata={"graph_id": "approval", "k": "v"})
    tid = t["thread_id"]
    first = await add_checkpoint(client, tid, "one")
    await add_checkpoint(client, tid, "two")
    r = await client.post(f"/threads/{tid}/copy")  # no body, as the SDK sends it
    assert r.status_code == 200, r.text
    copy = r.json()
    assert copy["thread_id"] != tid and copy["metadata"] == t["metadata"]
    assert copy["values"] == {"request": "two"} and copy["status"] == "idle"
    src = (await client.post(f"/threads/{tid}/history", json={"limit": 10})).json()
    dst = (await client.post(f"/threads/{copy['thread_id']}/history", json={"limit": 10})).json()
    assert [h["checkpoint"]["checkpoint_id"] for h in dst] == [
        h["checkpoint"]["checkpoint_id"] for h in src
    ]
    assert dst[-1]["checkpoint"]["checkpoint_id"] == first["checkpoint_id"]
    assert {h["checkpoint"]["thread_id"] for h in dst} == {copy["thread_id"]}
    # the copy is independent: writing to it leaves the source alone
    await add_checkpoint(client, copy["thread_id"], "three")
    assert len((await client.post(f"/threads/{tid}/history", json={"limit": 10})).json()) == 2
    # a missing source is 404 (the official server says 409; the SDK accepts either)
    r = await client.post(f"/threads/{uuid.uuid4()}/copy")
    assert r.status_code == 404


async def test_prune_delete_and_keep_latest(client: httpx.AsyncClient) -> None:
    keep = (await new_thread(client, metadata={"graph_id": "approval"}))["thread_id"]
    gone = (await new_thread(client))["thread_id"]
    for request in ("a", "b", "c"):
        await add_checkpoint(client, keep, request)
    r = await client.post("/threads/prune", json={"thread_ids": [keep], "strategy": "keep_latest"})
    assert r.status_code == 200 and r.json() == {"pruned_count": 1}
    history = (await client.post(f"/threads/{keep}/history", json={"limit": 10})).json()
    assert len(history) == 1 and history[0]["values"] == {"request": "c"}
    r = await client.post("/threads/prune", json={"thread_ids": [gone, str(uuid.uuid4())]})
    assert r.json() == {"pruned_count": 1}
    assert (await client.get(f"/threads/{gone}")).status_code == 404
    assert (await client.post("/threads/prune", json={"thread_ids": []})).json() == {
        "pruned_count": 0
    }
    r = await client.post("/threads/prune", json={"thread_ids": [keep], "strategy": "nope"})
    assert r.status_code == 422


async def test_delete_with_a_run_in_flight(client: httpx.AsyncClient) -> None:
    tid = (await new_thread(client, metadata={"graph_id": "approval"}))["thread_id"]
    await insert_run(client, tid, status="pending")
    r = await client.delete(f"/threads/{tid}")
    assert r.status_code == 204
    assert await count_rows(client, runs, tid) == 0
    assert (await client.get(f"/threads/{tid}")).status_code == 404
