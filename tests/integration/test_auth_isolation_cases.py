"""Cross-tenant cases the generated matrix cannot judge alone: ids inside bodies, system
assistants, client-chosen thread ids, checkpoints of other threads, identity in graphs, and
read-only callers on every route of the spec."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.api.auth import is_write
from tests.integration.isolation_requests import body_for, query_for
from tests.integration.isolation_support import (
    MARKER,
    SKIP_PATHS,
    Seed,
    Tenants,
    open_tenants,
    seed_tenant,
    snapshot,
)

SYSTEM_NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")


@pytest.fixture
async def seeded(db_url: str) -> AsyncIterator[tuple[Tenants, Seed]]:
    async with open_tenants(db_url) as t:
        yield t, await seed_tenant(t)


def _masked(r: httpx.Response, *ids: str) -> tuple[int, str]:
    text = r.text
    for i, value in enumerate(ids):
        text = text.replace(value, f"<id{i}>")
    return r.status_code, text


async def test_client_chosen_thread_id_of_another_tenant(seeded: tuple[Tenants, Seed]) -> None:
    """409, worded exactly like B's own duplicate: B learns nothing it could not guess."""
    t, seed = seeded
    before = await snapshot(t, seed)
    a_thread = seed.ids["thread_id"]
    own = (await t.b.post("/threads", json={})).json()["thread_id"]
    for if_exists in ("raise", "do_nothing"):
        r = await t.b.post("/threads", json={"thread_id": a_thread, "if_exists": if_exists})
        assert r.status_code == 409, r.text
        assert MARKER not in r.text
    theirs = await t.b.post("/threads", json={"thread_id": a_thread, "metadata": {"x": 1}})
    mine = await t.b.post("/threads", json={"thread_id": own, "metadata": {"x": 1}})
    assert _masked(theirs, a_thread) == _masked(mine, own)
    # runs that would create the thread on the fly cannot attach to A's thread either
    for suffix in ("runs", "runs/wait", "runs/stream"):
        r = await t.b.post(
            f"/threads/{a_thread}/{suffix}",
            json={"assistant_id": "agent", "input": {"messages": []}, "if_not_exists": "create"},
        )
        assert r.status_code in (404, 409), (suffix, r.status_code, r.text)
        assert MARKER not in r.text
    # bulk state updates at creation cannot write into A's thread either
    update = {"values": {"messages": [{"role": "ai", "content": "b"}]}, "as_node": "respond"}
    supersteps = [{"updates": [update]}]
    r = await t.b.post(
        "/threads",
        json={"thread_id": a_thread, "metadata": {"graph_id": "agent"}, "supersteps": supersteps},
    )
    assert r.status_code == 409, r.text
    fresh = {"thread_id": str(uuid.uuid4()), "metadata": {"graph_id": "agent"}}
    r = await t.b.post("/threads", json={**fresh, "supersteps": supersteps})
    assert r.status_code == 200 and r.json()["values"]["messages"][0]["content"] == "b", r.text
    r = await t.b.post("/threads", json={"thread_id": "not-a-uuid"})
    assert r.status_code == 422
    assert await snapshot(t, seed) == before


async def test_client_chosen_assistant_id_of_another_tenant(seeded: tuple[Tenants, Seed]) -> None:
    t, seed = seeded
    a_assistant = seed.ids["assistant_id"]
    own = (await t.b.post("/assistants", json={"graph_id": "agent"})).json()["assistant_id"]
    theirs = await t.b.post("/assistants", json={"graph_id": "agent", "assistant_id": a_assistant})
    mine = await t.b.post("/assistants", json={"graph_id": "agent", "assistant_id": own})
    assert theirs.status_code == 409
    assert _masked(theirs, a_assistant) == _masked(mine, own)
    r = await t.a.get(f"/assistants/{a_assistant}")
    assert r.json()["name"] == MARKER


async def test_ids_in_bodies_do_not_reach_another_tenant(seeded: tuple[Tenants, Seed]) -> None:
    t, seed = seeded
    before = await snapshot(t, seed)
    a_thread, a_assistant = seed.ids["thread_id"], seed.ids["assistant_id"]
    pending_thread, pending_run = seed.ids["pending_thread_id"], seed.ids["pending_run_id"]
    own = (await t.b.post("/threads", json={})).json()["thread_id"]

    r = await t.b.post("/threads/search", json={"ids": [a_thread, pending_thread]})
    assert r.status_code == 200 and r.json() == []
    for strategy in ("delete", "keep_latest"):
        r = await t.b.post("/threads/prune", json={"thread_ids": [a_thread], "strategy": strategy})
        assert r.status_code == 200 and r.json() == {"pruned_count": 0}, r.text
    r = await t.b.post("/runs/cancel", json={"thread_id": pending_thread, "run_ids": [pending_run]})
    assert r.status_code == 404, r.text
    for status in ("pending", "all"):
        r = await t.b.post("/runs/cancel", json={"status": status})
        assert r.status_code in (204, 404), r.text
    # A's private assistant is unknown to B, on B's thread and stateless
    body = {"assistant_id": a_assistant, "input": {"messages": []}}
    for url in (f"/threads/{own}/runs", f"/threads/{own}/runs/wait", "/runs", "/runs/wait"):
        r = await t.b.post(url, json=body)
        assert r.status_code == 404, (url, r.text)
    r = await t.b.post("/runs/batch", json=[body])
    assert r.status_code == 404 and MARKER not in r.text, r.text
    # A's checkpoint named on B's own thread reads and forks nothing of A's
    cp = seed.ids["checkpoint_id"]
    r = await t.b.post(
        f"/threads/{own}/state/checkpoint",
        json={"checkpoint": {"checkpoint_id": cp, "thread_id": a_thread}},
    )
    assert MARKER not in r.text and r.status_code in (200, 404), r.text
    r = await t.b.post(
        f"/threads/{own}/history", json={"limit": 10, "before": {"checkpoint_id": cp}}
    )
    assert MARKER not in r.text and r.status_code in (200, 404), r.text
    r = await t.b.post(
        f"/threads/{own}/runs/wait",
        json={"assistant_id": "agent", "input": None, "checkpoint_id": cp},
    )
    assert MARKER not in r.text, r.text
    assert MARKER not in (await t.b.get(f"/threads/{own}/state")).text
    assert (await t.a.get(f"/threads/{pending_thread}/runs/{pending_run}")).json()[
        "status"
    ] == "pending"
    assert await snapshot(t, seed) == before


async def test_store_is_bounded_by_tenant(seeded: tuple[Tenants, Seed]) -> None:
    t, seed = seeded
    ns, key = seed.namespace, seed.key
    params = {"namespace": ".".join(ns), "key": key}
    r = await t.b.get("/store/items", params=params)
    assert r.status_code == 200 and r.json() is None
    r = await t.b.request("DELETE", "/store/items", json={"namespace": ns, "key": key})
    assert r.status_code == 204
    put = await t.b.put("/store/items", json={"namespace": ns, "key": key, "value": {"b": 2}})
    assert put.status_code == 204
    assert (await t.b.get("/store/items", params=params)).json()["value"] == {"b": 2}
    assert (await t.a.get("/store/items", params=params)).json()["value"] == {"marker": MARKER}
    search = await t.b.post("/store/items/search", json={"namespace_prefix": []})
    assert [i["value"] for i in search.json()["items"]] == [{"b": 2}]
    a_search = await t.a.post("/store/items/search", json={"namespace_prefix": []})
    assert [i["value"] for i in a_search.json()["items"]] == [{"marker": MARKER}]


async def test_system_assistants_are_shared_but_not_writable(
    seeded: tuple[Tenants, Seed],
) -> None:
    t, _ = seeded
    system_id = str(uuid.uuid5(SYSTEM_NAMESPACE, "agent"))
    a_view = (await t.a.get(f"/assistants/{system_id}")).json()
    b_view = await t.b.get(f"/assistants/{system_id}")
    assert b_view.status_code == 200 and b_view.json() == a_view
    found = await t.b.post("/assistants/search", json={"graph_id": "agent"})
    assert system_id in [a["assistant_id"] for a in found.json()]
    r = await t.b.patch(f"/assistants/{system_id}", json={"metadata": {"owned": "bob"}})
    assert r.status_code in (403, 404), r.text
    assert (await t.b.delete(f"/assistants/{system_id}")).status_code in (403, 404)
    assert (await t.a.get(f"/assistants/{system_id}")).json() == a_view


async def test_read_only_caller_on_every_route(seeded: tuple[Tenants, Seed]) -> None:
    """Generated from the spec: writes answer 403 before anything runs; reads never do."""
    t, seed = seeded
    before = await snapshot(t, seed)
    problems = []
    async with t.client("tenant-a", "reader", scope="read") as reader:
        for path, item in sorted(t.spec["paths"].items()):
            if path in SKIP_PATHS:
                continue
            for method, op in item.items():
                method = method.upper()
                url = path
                for name in ("assistant_id", "thread_id", "run_id", "checkpoint_id"):
                    url = url.replace("{" + name + "}", seed.ids.get(name, str(uuid.uuid4())))
                url = url.replace("{namespace}", "a")
                body = body_for(t.spec, op, seed)
                kwargs: dict[str, Any] = {"params": query_for(op, seed)}
                if body is not None:
                    kwargs["content"] = json.dumps(body)
                    kwargs["headers"] = {"content-type": "application/json"}
                if "stream" in path and method == "GET":
                    continue  # joining a finished stream is a read; it is covered by the matrix
                r = await reader.request(method, url, **kwargs)
                if is_write(method, path) != (r.status_code == 403):
                    problems.append(f"{method} {path}: {r.status_code} {r.text[:120]}")
    assert not problems, "\n".join(problems)
    assert await snapshot(t, seed) == before


async def test_identity_reaches_graphs_and_memory(db_url: str, tmp_path: Path) -> None:
    config = tmp_path / "langgraph.json"
    config.write_text(
        json.dumps(
            {
                "graphs": {
                    "identity": "tests.integration.auth_identity_graph:graph",
                    "memory": "app.examples.memory:graph",
                }
            }
        )
    )
    async with open_tenants(db_url, config_file=config) as t:
        # the client tries to pick its own identity; the server's wins
        forged = {"langgraph_auth_user_id": "mallory", "tenant_id": "tenant-a", "user_id": "x"}
        r = await t.b.post(
            "/runs/wait",
            json={"assistant_id": "identity", "input": {}, "config": {"configurable": forged}},
        )
        assert r.status_code == 200, r.text
        seen = r.json()["seen"]
        assert seen["user_id"] == "bob" and seen["tenant_id"] == "tenant-b"
        assert seen["plain_user_id"] == "bob"
        assert seen["auth_user"]["identity"] == "bob"
        assert seen["auth_user"]["tenant_id"] == "tenant-b"
        assert seen["server_info_identity"] == "bob"
        assert seen["server_info_tenant"] == "tenant-b"

        async def remember(client: httpx.AsyncClient, text: str) -> str:
            body = {
                "assistant_id": "memory",
                "input": {"messages": [{"role": "human", "content": text}]},
                "config": {"configurable": forged},
            }
            r = await client.post("/runs/wait", json=body)
            assert r.status_code == 200, r.text
            return str(r.json()["messages"][-1]["content"])

        async with t.client("tenant-a", "carol") as carol:
            await remember(t.a, "alice likes tea")
            assert "alice likes tea" not in await remember(carol, "carol likes coffee")
            assert "alice likes tea" not in await remember(t.b, "bob likes juice")
            recalled = await remember(t.a, "what do I like?")
            assert "alice likes tea" in recalled
            assert "carol" not in recalled and "bob" not in recalled
            # memories live under ("memories", <user>) in each caller's own tenant
            ns = await t.a.post("/store/namespaces", json={})
            assert ns.json()["namespaces"] == [["memories", "alice"], ["memories", "carol"]]
            b_ns = await t.b.post("/store/namespaces", json={})
            assert b_ns.json()["namespaces"] == [["memories", "bob"]]


async def test_credentials_are_never_stored_with_runs(seeded: tuple[Tenants, Seed]) -> None:
    """Forwarded x-* headers reach run config, but never Authorization or x-api-key."""
    t, seed = seeded
    token = t.a.headers["authorization"].removeprefix("Bearer ")
    stray_key = "lsv2_pt_stray_langsmith_key_0123456789"
    thread = seed.ids["thread_id"]
    r = await t.a.post(
        f"/threads/{thread}/runs/wait",
        json={"assistant_id": "agent", "input": {"messages": [{"role": "human", "content": "x"}]}},
        headers={"x-api-key": stray_key, "x-user-note": "kept"},
    )
    assert r.status_code == 200, r.text
    reads = [
        await t.a.get(f"/threads/{thread}"),
        await t.a.get(f"/threads/{thread}/runs"),
        await t.a.get(f"/threads/{thread}/state"),
        await t.a.post(f"/threads/{thread}/history", json={"limit": 100}),
    ]
    text = "".join(r.text for r in reads)
    assert "x-user-note" in text  # the forwarding itself works, so the check below means something
    assert token not in text and stray_key not in text
    assert token[-20:] not in text
