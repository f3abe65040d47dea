"""Assistants over HTTP on real storage (SQLite and PostgreSQL)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from app.assistants.service import system_assistant_id
from tests.integration.apiclient import api_client

GRAPHS = {"agent", "approval", "fanout", "memory", "long_conversation"}


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(db_url) as c:
        yield c


async def create(client: httpx.AsyncClient, **body) -> dict:
    r = await client.post("/assistants", json={"graph_id": "agent", **body})
    assert r.status_code == 200, r.text
    return r.json()


async def test_system_assistants_have_the_official_ids(client: httpx.AsyncClient) -> None:
    r = await client.post("/assistants/search", json={"limit": 100})
    assert r.status_code == 200
    found = {a["graph_id"]: a for a in r.json()}
    assert set(found) == GRAPHS
    agent = found["agent"]
    # the id the official server (and its client tests) use for graph "agent"
    assert agent["assistant_id"] == str(
        uuid.uuid5(uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8"), "agent")
    )
    assert agent["assistant_id"] == system_assistant_id("agent")
    assert agent["metadata"] == {"created_by": "system"}
    assert agent["version"] == 1
    assert agent["name"] == "agent"
    assert agent["created_at"].endswith("+00:00")


async def test_create_get_and_if_exists(client: httpx.AsyncClient) -> None:
    aid = str(uuid.uuid4())
    created = await create(
        client, assistant_id=aid, config={"configurable": {"model": "x"}}, name="mine"
    )
    assert created["assistant_id"] == aid
    assert created["context"] == {"model": "x"}  # configurable mirrored into context
    assert created["version"] == 1
    r = await client.get(f"/assistants/{aid}")
    assert r.status_code == 200 and r.json() == created
    r = await client.post("/assistants", json={"graph_id": "agent", "assistant_id": aid})
    assert r.status_code == 409 and isinstance(r.json()["detail"], str)
    r = await client.post(
        "/assistants",
        json={"graph_id": "agent", "assistant_id": aid, "if_exists": "do_nothing", "name": "x"},
    )
    assert r.status_code == 200 and r.json()["name"] == "mine"


async def test_create_defaults_and_context_sync(client: httpx.AsyncClient) -> None:
    created = await create(client, context={"k": 1})
    assert created["name"] == "Untitled"
    assert created["config"]["configurable"] == {"k": 1}
    r = await client.post(
        "/assistants",
        json={"graph_id": "agent", "config": {"configurable": {"a": 1}}, "context": {"b": 2}},
    )
    assert r.status_code == 400


async def test_create_errors(client: httpx.AsyncClient) -> None:
    r = await client.post("/assistants", json={"graph_id": "nope"})
    assert r.status_code == 404 and r.json()["detail"] == "Graph 'nope' not found"
    r = await client.post("/assistants", json={"graph_id": "agent", "assistant_id": "zzz"})
    assert r.status_code == 422
    r = await client.post("/assistants", json={})
    assert r.status_code == 422 and "graph_id" in r.json()["detail"]
    r = await client.post(
        "/assistants", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 422 and isinstance(r.json()["detail"], str)


async def test_get_errors(client: httpx.AsyncClient) -> None:
    assert (await client.get("/assistants/not-a-uuid")).status_code == 422
    # a graph id is only an assistant id for runs and /graph
    assert (await client.get("/assistants/agent")).status_code == 422
    r = await client.get(f"/assistants/{uuid.uuid4()}")
    assert r.status_code == 404 and "not found" in r.json()["detail"]


async def test_patch_versions_and_set_latest(client: httpx.AsyncClient) -> None:
    a = await create(client, metadata={"a": 1}, config={"configurable": {"v": 1}}, name="n1")
    aid = a["assistant_id"]
    r = await client.patch(f"/assistants/{aid}", json={"metadata": {"b": 2}, "name": "n2"})
    assert r.status_code == 200
    patched = r.json()
    assert patched["version"] == 2
    assert patched["metadata"] == {"a": 1, "b": 2}  # shallow merge
    assert patched["config"] == {"configurable": {"v": 1}}  # kept
    r = await client.patch(f"/assistants/{aid}", json={"context": {"v": 3}})
    assert r.json()["version"] == 3
    assert r.json()["config"]["configurable"] == {"v": 3}
    r = await client.post(f"/assistants/{aid}/versions", json={})
    assert [v["version"] for v in r.json()] == [3, 2, 1]
    assert "updated_at" not in r.json()[0]
    r = await client.post(f"/assistants/{aid}/versions", json={"metadata": {"b": 2}, "limit": 1})
    assert [v["version"] for v in r.json()] == [3]
    r = await client.post(f"/assistants/{aid}/latest", json={"version": 1})
    assert r.status_code == 200
    assert r.json()["version"] == 1 and r.json()["name"] == "n1"
    assert r.json()["metadata"] == {"a": 1}
    assert (await client.get(f"/assistants/{aid}")).json()["version"] == 1
    r = await client.post(f"/assistants/{aid}/latest", json={"version": 9})
    assert r.status_code == 404
    r = await client.post(f"/assistants/{aid}/versions", json={"limit": 0})
    assert r.status_code == 422


async def test_patch_errors(client: httpx.AsyncClient) -> None:
    r = await client.patch(f"/assistants/{uuid.uuid4()}", json={"name": "x"})
    assert r.status_code == 404
    a = await create(client)
    r = await client.patch(f"/assistants/{a['assistant_id']}", json={"graph_id": "nope"})
    assert r.status_code == 404
    # system assistants are shared by every tenant: read-only
    r = await client.patch(f"/assistants/{system_assistant_id('agent')}", json={"name": "x"})
    assert r.status_code == 403


async def test_delete(client: httpx.AsyncClient) -> None:
    a = await create(client)
    aid = a["assistant_id"]
    r = await client.post("/threads", json={"metadata": {"assistant_id": aid}})
    tid = r.json()["thread_id"]
    other = (await client.post("/threads", json={})).json()["thread_id"]
    r = await client.delete(f"/assistants/{aid}?delete_threads=true")
    assert r.status_code == 204 and r.content == b""
    assert (await client.get(f"/assistants/{aid}")).status_code == 404
    assert (await client.post(f"/assistants/{aid}/versions", json={})).status_code == 404
    assert (await client.get(f"/threads/{tid}")).status_code == 404
    assert (await client.get(f"/threads/{other}")).status_code == 200
    assert (await client.delete(f"/assistants/{aid}")).status_code == 404
    assert (await client.delete("/assistants/nope")).status_code == 422


async def test_search_filters_sort_select_and_pagination(client: httpx.AsyncClient) -> None:
    for i, name in enumerate(["Beta", "alpha", "Gamma"]):
        await create(client, name=name, metadata={"i": i, "team": {"x": 1, "y": i}})
    r = await client.post("/assistants/search", json={"metadata": {"team": {"x": 1}}})
    assert {a["name"] for a in r.json()} == {"Beta", "alpha", "Gamma"}
    r = await client.post("/assistants/search", json={"metadata": {"team": {"y": 2}}})
    assert [a["name"] for a in r.json()] == ["Gamma"]
    r = await client.post("/assistants/search", json={"metadata": {"i": "1"}})
    assert r.json() == []  # containment compares JSON types
    r = await client.post("/assistants/search", json={"name": "LPh"})
    assert [a["name"] for a in r.json()] == ["alpha"]
    r = await client.post(
        "/assistants/search",
        json={"metadata": {"team": {"x": 1}}, "sort_by": "name", "sort_order": "asc"},
    )
    assert [a["name"] for a in r.json()] == ["alpha", "Beta", "Gamma"]
    r = await client.post(
        "/assistants/search",
        json={"metadata": {"team": {"x": 1}}, "limit": 2, "sort_by": "name", "sort_order": "ASC"},
    )
    assert len(r.json()) == 2
    assert r.headers["x-pagination-next"] == "2"
    assert r.headers["x-pagination-total"] == "3"
    r = await client.post(
        "/assistants/search",
        json={"metadata": {"team": {"x": 1}}, "limit": 2, "offset": 2, "sort_by": "name"},
    )
    assert len(r.json()) == 1
    assert "x-pagination-next" not in r.headers
    assert r.headers["x-pagination-total"] == "3"
    r = await client.post(
        "/assistants/search", json={"graph_id": "agent", "select": ["assistant_id", "name"]}
    )
    assert all(set(a) == {"assistant_id", "name"} for a in r.json())
    assert len(r.json()) == 4  # 3 + the system assistant
    r = await client.post("/assistants/search", json={"select": ["nope"]})
    assert r.status_code == 422 and "allowed" in r.json()["detail"]
    r = await client.post("/assistants/search", json={"graph_id": "nope"})
    assert r.status_code == 404
    r = await client.post("/assistants/search", json={"sort_order": "sideways"})
    assert r.status_code == 422
    r = await client.post("/assistants/search", json={"sort_by": "unknown_column"})
    assert r.status_code == 200  # unknown sort_by falls back to created_at


async def test_name_search_takes_like_characters_literally(client: httpx.AsyncClient) -> None:
    for name in ["50% off", "500 units", "a_b", "axb", "path/to", "Case MIX"]:
        await create(client, name=name)

    async def names(**body: object) -> set[str]:
        r = await client.post("/assistants/search", json={"limit": 100, **body})
        assert r.status_code == 200, r.text
        return {a["name"] for a in r.json()}

    assert await names(name="50%") == {"50% off"}
    assert await names(name="a_b") == {"a_b"}
    assert await names(name="h/t") == {"path/to"}
    assert await names(name="case mix") == {"Case MIX"}
    assert await names(name="%") == {"50% off"}
    # one shape, other values: nothing of the first search sticks
    assert await names(name="500") == {"500 units"}
    # the system assistants (one per example graph) are searched too: "_" finds
    # memory_agent-like names, never "axb"
    underscored = await names(name="_")
    assert "a_b" in underscored and "axb" not in underscored
    assert all("_" in name for name in underscored)
    for text in ("x", "_", "%", "50%"):
        r = await client.post("/assistants/count", json={"name": text})
        assert r.status_code == 200 and r.json() == len(await names(name=text)), text


async def test_count(client: httpx.AsyncClient) -> None:
    await create(client, metadata={"k": "v"})
    await create(client, graph_id="approval", metadata={"k": "v"})
    r = await client.post("/assistants/count", json={})
    assert r.status_code == 200 and r.json() == 7
    r = await client.post("/assistants/count", json={"metadata": {"k": "v"}})
    assert r.json() == 2
    r = await client.post("/assistants/count", json={"graph_id": "approval"})
    assert r.json() == 2


async def test_schemas_and_graph(client: httpx.AsyncClient) -> None:
    aid = system_assistant_id("approval")
    r = await client.get(f"/assistants/{aid}/schemas")
    assert r.status_code == 200
    body = r.json()
    assert body["graph_id"] == "approval"
    assert "request" in body["input_schema"]["properties"]
    assert "proposal" in body["state_schema"]["properties"]
    for xray in ("", "?xray=true", "?xray=2"):
        r = await client.get(f"/assistants/approval/graph{xray}")
        assert r.status_code == 200, r.text
        nodes = {n["id"] for n in r.json()["nodes"]}
        assert {"propose", "review", "execute"} <= nodes
        assert all("id" not in n.get("data", {}) for n in r.json()["nodes"])
        assert {"source", "target"} <= set(r.json()["edges"][0])
    r = await client.get(f"/assistants/{aid}/graph")
    assert r.status_code == 200
    assert (await client.get("/assistants/approval/graph?xray=-1")).status_code == 422
    assert (await client.get("/assistants/approval/graph?xray=maybe")).status_code == 422
    assert (await client.get("/assistants/nograph/graph")).status_code == 422
    assert (await client.get(f"/assistants/{uuid.uuid4()}/schemas")).status_code == 404


async def test_delete_cancels_in_flight_runs(client: httpx.AsyncClient) -> None:
    from datetime import UTC, datetime

    from sqlalchemy import insert, select

    from app.db.tables import runs

    aid = (await create(client))["assistant_id"]
    tid = (await client.post("/threads", json={})).json()["thread_id"]
    engine = client._transport.app.state.graphkeep.engine  # type: ignore[attr-defined]
    now = datetime.now(UTC)
    run_id = str(uuid.uuid4())
    async with engine.begin() as conn:
        await conn.execute(
            insert(runs).values(
                run_id=run_id,
                tenant_id="default",
                thread_id=tid,
                assistant_id=aid,
                graph_id="agent",
                status="pending",
                metadata={},
                kwargs={},
                multitask_strategy="reject",
                created_at=now,
                updated_at=now,
                available_at=now,
            )
        )
    assert (await client.delete(f"/assistants/{aid}")).status_code == 204
    async with engine.connect() as conn:
        status = (await conn.execute(select(runs.c.status).where(runs.c.run_id == run_id))).scalar()
    assert status == "interrupted"
