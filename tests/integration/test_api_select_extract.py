"""`select` on state and history reads and `extract` on thread search, over HTTP on real
storage."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.integration.apiclient import api_client
from tests.integration.test_api_threads import add_checkpoint, new_thread

STATE_KEYS = {
    "values",
    "next",
    "tasks",
    "checkpoint",
    "parent_checkpoint",
    "metadata",
    "created_at",
    "interrupts",
    "checkpoint_id",
    "parent_checkpoint_id",
}


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(db_url) as c:
        yield c


async def approval_thread(client: httpx.AsyncClient, *requests: str) -> tuple[str, list[dict]]:
    tid = (await new_thread(client, metadata={"graph_id": "approval"}))["thread_id"]
    return tid, [await add_checkpoint(client, tid, r) for r in requests]


# --------------------------------------------------------------------------- select


async def test_state_without_select_has_every_field(client: httpx.AsyncClient) -> None:
    tid, _ = await approval_thread(client, "a")
    state = (await client.get(f"/threads/{tid}/state")).json()
    assert set(state) == STATE_KEYS
    assert state["values"] == {"request": "a"}


async def test_state_select_fields_and_state_keys(client: httpx.AsyncClient) -> None:
    tid, (first, second) = await approval_thread(client, "a", "b")
    r = await client.get(f"/threads/{tid}/state", params={"select": ["next", "checkpoint"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"next", "checkpoint"}
    assert body["checkpoint"]["checkpoint_id"] == second["checkpoint_id"]

    # values.<key>: only that state key; a comma-separated list works too
    r = await client.get(f"/threads/{tid}/state?select=values.request,values.missing,metadata")
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"values", "metadata"}
    assert body["values"] == {"request": "b"}

    # `values` and `values.<key>` together: the whole values
    r = await client.get(
        f"/threads/{tid}/state", params={"select": ["values.request", "values", "next"]}
    )
    assert set(r.json()) == {"values", "next"}
    assert r.json()["values"] == {"request": "b"}

    # at a checkpoint id, and by checkpoint object
    r = await client.get(
        f"/threads/{tid}/state/{first['checkpoint_id']}", params={"select": ["values.request"]}
    )
    assert r.json() == {"values": {"request": "a"}}
    r = await client.post(
        f"/threads/{tid}/state/checkpoint",
        json={"checkpoint": {"checkpoint_id": first["checkpoint_id"]}, "select": ["checkpoint"]},
    )
    assert r.status_code == 200, r.text
    assert r.json() == {"checkpoint": first}


async def test_state_select_on_thread_without_graph(client: httpx.AsyncClient) -> None:
    tid = (await new_thread(client))["thread_id"]
    r = await client.get(f"/threads/{tid}/state", params={"select": ["next", "values.x"]})
    assert r.json() == {"next": [], "values": {}}


async def test_history_select(client: httpx.AsyncClient) -> None:
    tid, _ = await approval_thread(client, "a", "b", "c")
    r = await client.post(
        f"/threads/{tid}/history", json={"limit": 2, "select": ["values.request", "checkpoint_id"]}
    )
    assert r.status_code == 200, r.text
    items = r.json()
    assert [set(i) for i in items] == [{"values", "checkpoint_id"}] * 2
    assert [i["values"] for i in items] == [{"request": "c"}, {"request": "b"}]
    r = await client.get(f"/threads/{tid}/history", params={"limit": 1, "select": "next"})
    assert r.json() == [{"next": ["review"]}]
    # without select: the full shape
    full = (await client.post(f"/threads/{tid}/history", json={"limit": 1})).json()
    assert set(full[0]) == STATE_KEYS


@pytest.mark.parametrize("select", [["secret"], ["values", "nope"], ["values."]])
async def test_unknown_select_field_is_422(client: httpx.AsyncClient, select: list[str]) -> None:
    tid, (cp,) = await approval_thread(client, "a")
    requests = [
        client.get(f"/threads/{tid}/state", params={"select": select}),
        client.get(f"/threads/{tid}/state/{cp['checkpoint_id']}", params={"select": select}),
        client.post(f"/threads/{tid}/state/checkpoint", json={"checkpoint": cp, "select": select}),
        client.post(f"/threads/{tid}/history", json={"select": select}),
        client.get(f"/threads/{tid}/history", params={"select": select}),
    ]
    for request in requests:
        r = await request
        assert r.status_code == 422, r.text
        assert "select" in r.json()["detail"] and "allowed" in r.json()["detail"]


# --------------------------------------------------------------------------- extract


async def test_search_extract(client: httpx.AsyncClient) -> None:
    tid = (await new_thread(client, metadata={"graph_id": "approval", "tags": ["x", "y"]}))[
        "thread_id"
    ]
    await add_checkpoint(client, tid, "deploy")
    extract = {
        "req": "values.request",
        "last_tag": "metadata.tags[-1]",
        "first_tag": "metadata.tags[0]",
        "out_of_range": "metadata.tags[5]",
        "not_a_list": "metadata.graph_id[0]",
        "missing": "values.nope.deeper",
        "whole": "metadata",
    }
    r = await client.post("/threads/search", json={"ids": [tid], "extract": extract})
    assert r.status_code == 200, r.text
    (thread,) = r.json()
    assert thread["thread_id"] == tid and thread["status"] == "interrupted"
    assert thread["extracted"] == {
        "req": "deploy",
        "last_tag": "y",
        "first_tag": "x",
        "out_of_range": None,
        "not_a_list": None,
        "missing": None,
        "whole": {"graph_id": "approval", "tags": ["x", "y"]},
    }
    # with select: the selected fields plus `extracted` (paths may name unselected columns)
    r = await client.post(
        "/threads/search", json={"ids": [tid], "select": ["thread_id"], "extract": extract}
    )
    (thread,) = r.json()
    assert set(thread) == {"thread_id", "extracted"}
    assert thread["extracted"]["req"] == "deploy"
    # without extract: no `extracted` key
    (thread,) = (await client.post("/threads/search", json={"ids": [tid]})).json()
    assert "extracted" not in thread


@pytest.mark.parametrize(
    ("extract", "message"),
    [
        ({f"a{i}": "values.x" for i in range(11)}, "at most 10"),
        ({"status": "values.x"}, "thread field"),
        ({"1bad": "values.x"}, "identifier"),
        ({"ok": "secret.x"}, "must start with"),
        ({"ok": ""}, "must start with"),
    ],
)
async def test_search_extract_errors(
    client: httpx.AsyncClient, extract: dict[str, str], message: str
) -> None:
    r = await client.post("/threads/search", json={"extract": extract})
    assert r.status_code == 422, r.text
    assert message in r.json()["detail"]
