"""Thread state, history and update_state over HTTP on real storage."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from langgraph.types import Command

from tests.integration.apiclient import api_client
from tests.integration.test_api_threads import app_state, insert_run, new_thread

SUBGRAPH_MODULE = """
from typing_extensions import TypedDict
from langgraph.graph import START, StateGraph
from langgraph.types import interrupt

class S(TypedDict, total=False):
    x: str
    answer: str

def ask(state: S) -> dict:
    return {"answer": interrupt("inner question")}

inner = StateGraph(S)
inner.add_node("ask", ask)
inner.add_edge(START, "ask")
inner_graph = inner.compile()

outer = StateGraph(S)
outer.add_node("child", inner_graph)
outer.add_edge(START, "child")
graph = outer.compile()
"""


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(db_url) as c:
        yield c


async def run_graph(client: httpx.AsyncClient, graph_id: str, thread_id: str, payload) -> None:
    """Drive the graph directly on the server's saver (what a run does, minus the queue)."""
    state = app_state(client)
    config = {"configurable": {"thread_id": thread_id}}
    async with state.graphs.open(
        graph_id,
        config=config,
        checkpointer=state.saver.for_tenant("default"),
        store=state.store.for_tenant("default"),
    ) as graph:
        await graph.ainvoke(payload, config)


async def test_state_of_new_thread_and_unknowns(client: httpx.AsyncClient) -> None:
    tid = (await new_thread(client))["thread_id"]
    r = await client.get(f"/threads/{tid}/state")
    assert r.status_code == 200
    s = r.json()
    assert s["values"] == {} and s["next"] == [] and s["tasks"] == [] and s["interrupts"] == []
    assert s["checkpoint"] is None and s["metadata"] is None and s["created_at"] is None
    assert (await client.post(f"/threads/{tid}/history", json={"limit": 5})).json() == []
    assert (await client.get(f"/threads/{uuid.uuid4()}/state")).status_code == 404
    assert (await client.get("/threads/nope/state")).status_code == 422
    assert (await client.post(f"/threads/{uuid.uuid4()}/history", json={})).status_code == 404


async def test_interrupted_run_state(client: httpx.AsyncClient) -> None:
    tid = (await new_thread(client, metadata={"graph_id": "approval"}))["thread_id"]
    await run_graph(client, "approval", tid, {"request": "deploy"})
    s = (await client.get(f"/threads/{tid}/state")).json()
    assert s["values"] == {"request": "deploy", "proposal": "execute: deploy"}
    assert s["next"] == ["review"]
    cp = s["checkpoint"]
    assert set(cp) == {"thread_id", "checkpoint_ns", "checkpoint_id"}
    assert cp["thread_id"] == tid and cp["checkpoint_ns"] == ""
    assert s["checkpoint_id"] == cp["checkpoint_id"]
    assert s["parent_checkpoint"]["checkpoint_id"] == s["parent_checkpoint_id"]
    (task,) = s["tasks"]
    assert task["name"] == "review" and task["error"] is None
    (intr,) = task["interrupts"]
    assert set(intr) == {"id", "value"}  # RemoteGraph rebuilds Interrupt(**intr)
    assert intr["value"]["question"] == "Approve this action?"
    assert s["interrupts"] == [intr]
    assert s["metadata"]["source"] == "loop" and s["created_at"].endswith("+00:00")

    # the same checkpoint by id (GET) and by checkpoint object (POST)
    at = (await client.get(f"/threads/{tid}/state/{cp['checkpoint_id']}")).json()
    assert at == s
    r = await client.post(
        f"/threads/{tid}/state/checkpoint",
        json={"checkpoint": {**cp, "thread_id": str(uuid.uuid4())}, "subgraphs": False},
    )
    assert r.status_code == 200 and r.json() == s  # the path's thread id wins
    parent = s["parent_checkpoint"]["checkpoint_id"]
    older = (await client.get(f"/threads/{tid}/state/{parent}")).json()
    assert older["checkpoint"]["checkpoint_id"] == parent and older["next"] == ["propose"]
    r = await client.get(f"/threads/{tid}/state/1f000000-0000-6000-8000-000000000000")
    assert r.status_code == 404


async def test_update_state_as_node_resumes_flow_and_refreshes_thread(
    client: httpx.AsyncClient,
) -> None:
    tid = (await new_thread(client, metadata={"graph_id": "approval"}))["thread_id"]
    await run_graph(client, "approval", tid, {"request": "deploy"})
    r = await client.post(
        f"/threads/{tid}/state", json={"values": {"approved": True}, "as_node": "review"}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body["checkpoint"]) == {"thread_id", "checkpoint_ns", "checkpoint_id"}
    assert body["checkpoint_id"] == body["checkpoint"]["checkpoint_id"]
    s = (await client.get(f"/threads/{tid}/state")).json()
    assert s["next"] == ["execute"] and s["values"]["approved"] is True
    assert s["metadata"]["source"] == "update"
    thread = (await client.get(f"/threads/{tid}")).json()
    assert thread["status"] == "interrupted"  # `next` is not empty
    assert thread["values"]["approved"] is True and thread["interrupts"] == {}
    await run_graph(client, "approval", tid, None)
    r = await client.post(f"/threads/{tid}/state", json={"values": {"result": "manual"}})
    assert r.status_code == 200, r.text
    thread = (await client.get(f"/threads/{tid}")).json()
    assert thread["status"] == "idle" and thread["values"]["result"] == "manual"


async def test_update_state_fork_from_checkpoint(client: httpx.AsyncClient) -> None:
    tid = (await new_thread(client, metadata={"graph_id": "approval"}))["thread_id"]
    await run_graph(client, "approval", tid, {"request": "deploy"})
    history = (await client.post(f"/threads/{tid}/history", json={"limit": 10})).json()
    base = next(h for h in history if h["next"] == ["propose"])
    for shape in ({"checkpoint": base["checkpoint"]}, {"checkpoint_id": base["checkpoint_id"]}):
        r = await client.post(
            f"/threads/{tid}/state", json={"values": {"request": "rollback"}, **shape}
        )
        assert r.status_code == 200, r.text
        latest = (await client.get(f"/threads/{tid}/state")).json()
        assert latest["checkpoint"]["checkpoint_id"] == r.json()["checkpoint"]["checkpoint_id"]
        assert latest["parent_checkpoint"]["checkpoint_id"] == base["checkpoint_id"]
        assert latest["values"]["request"] == "rollback"


async def test_update_state_errors(client: httpx.AsyncClient) -> None:
    bare = (await new_thread(client))["thread_id"]
    r = await client.post(f"/threads/{bare}/state", json={"values": {"request": "x"}})
    assert r.status_code == 400 and "graph_id" in r.json()["detail"]
    tid = (await new_thread(client, metadata={"graph_id": "approval"}))["thread_id"]
    r = await client.post(
        f"/threads/{tid}/state", json={"values": {"request": "x"}, "as_node": "no_such_node"}
    )
    assert r.status_code == 400
    await insert_run(client, tid, status="running")
    r = await client.post(f"/threads/{tid}/state", json={"values": {"request": "x"}})
    assert r.status_code == 409
    r = await client.post(f"/threads/{uuid.uuid4()}/state", json={"values": {}})
    assert r.status_code == 404
    r = await client.post(f"/threads/{tid}/state", json={"values": 5})
    assert r.status_code in (400, 409)


async def test_history_limit_before_and_metadata(client: httpx.AsyncClient) -> None:
    tid = (await new_thread(client, metadata={"graph_id": "approval"}))["thread_id"]
    await run_graph(client, "approval", tid, {"request": "deploy"})
    await client.post(
        f"/threads/{tid}/state", json={"values": {"approved": False}, "as_node": "review"}
    )
    full = (await client.post(f"/threads/{tid}/history", json={"limit": 100})).json()
    ids = [h["checkpoint_id"] for h in full]
    assert len(ids) == 4 and ids == sorted(ids, reverse=True)  # newest first
    assert len((await client.post(f"/threads/{tid}/history", json={"limit": 2})).json()) == 2
    # server default without a limit is 1, as the official server
    assert len((await client.post(f"/threads/{tid}/history", json={})).json()) == 1
    pivot = full[1]
    for before in (
        pivot["checkpoint_id"],
        pivot["checkpoint"],  # flat checkpoint dict (what RemoteGraph sends)
        {"configurable": pivot["checkpoint"]},
    ):
        r = await client.post(f"/threads/{tid}/history", json={"limit": 10, "before": before})
        assert r.status_code == 200, r.text
        assert [h["checkpoint_id"] for h in r.json()] == ids[2:]
    r = await client.post(
        f"/threads/{tid}/history", json={"limit": 10, "metadata": {"source": "update"}}
    )
    assert [h["checkpoint_id"] for h in r.json()] == [ids[0]]
    r = await client.get(f"/threads/{tid}/history", params={"limit": 3, "before": ids[0]})
    assert [h["checkpoint_id"] for h in r.json()] == ids[1:4]
    assert (await client.get(f"/threads/{tid}/history")).json()[0]["checkpoint_id"] == ids[0]
    r = await client.post(f"/threads/{tid}/history", json={"limit": 0})
    assert r.status_code == 422
    r = await client.post(f"/threads/{tid}/history", json={"limit": 1, "before": 5})
    assert r.status_code == 422


@pytest.fixture
async def subgraph_client(db_url: str, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    (tmp_path / "nested.py").write_text(SUBGRAPH_MODULE)
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"nested": "./nested.py:graph"}}))
    async with api_client(db_url, config_file=config) as c:
        yield c


async def test_subgraph_state(subgraph_client: httpx.AsyncClient) -> None:
    client = subgraph_client
    tid = (await new_thread(client, metadata={"graph_id": "nested"}))["thread_id"]
    await run_graph(client, "nested", tid, {"x": "1"})
    flat = (await client.get(f"/threads/{tid}/state")).json()
    (task,) = flat["tasks"]
    assert task["name"] == "child" and task["state"] is None
    assert task["checkpoint"]["checkpoint_ns"].startswith("child:")
    assert task["checkpoint"]["thread_id"] == tid
    deep = (await client.get(f"/threads/{tid}/state", params={"subgraphs": "true"})).json()
    inner = deep["tasks"][0]["state"]
    assert inner["next"] == ["ask"]
    assert inner["tasks"][0]["interrupts"][0]["value"] == "inner question"
    assert inner["checkpoint"]["checkpoint_ns"].startswith("child:")
    # a subgraph's own history through `checkpoint`
    r = await client.post(
        f"/threads/{tid}/history",
        json={"limit": 10, "checkpoint": {"checkpoint_ns": task["checkpoint"]["checkpoint_ns"]}},
    )
    assert r.status_code == 200 and r.json()
    assert all(h["checkpoint"]["checkpoint_ns"].startswith("child:") for h in r.json())
    # resuming completes the subgraph
    state = app_state(client)
    config = {"configurable": {"thread_id": tid}}
    async with state.graphs.open(
        "nested", config=config, checkpointer=state.saver.for_tenant("default"), store=None
    ) as graph:
        await graph.ainvoke(Command(resume="yes"), config)
    done = (await client.get(f"/threads/{tid}/state")).json()
    assert done["values"] == {"x": "1", "answer": "yes"} and done["next"] == []


async def test_assistant_subgraphs(subgraph_client: httpx.AsyncClient) -> None:
    from app.assistants.service import system_assistant_id

    aid = system_assistant_id("nested")
    r = await subgraph_client.get(f"/assistants/{aid}/subgraphs")
    assert r.status_code == 200
    assert list(r.json()) == ["child"]
    assert "x" in r.json()["child"]["input_schema"]["properties"]
    assert set(r.json()["child"]) == {
        "input_schema",
        "output_schema",
        "state_schema",
        "config_schema",
        "context_schema",
    }
    r = await subgraph_client.get(f"/assistants/{aid}/subgraphs/child", params={"recurse": "true"})
    assert list(r.json()) == ["child"]
    r = await subgraph_client.get(f"/assistants/{aid}/subgraphs/nothing")
    assert r.status_code == 200 and r.json() == {}
    assert (await subgraph_client.get("/assistants/bad/subgraphs")).status_code == 422


async def test_create_with_supersteps(client: httpx.AsyncClient) -> None:
    body = {
        "metadata": {"graph_id": "approval"},
        "supersteps": [
            {"updates": [{"values": {"request": "deploy"}, "as_node": "propose"}]},
            {"updates": [{"values": {"approved": True}, "as_node": "review"}]},
        ],
    }
    r = await client.post("/threads", json=body)
    assert r.status_code == 200, r.text
    thread = r.json()
    assert thread["values"] == {"request": "deploy", "approved": True}
    assert thread["status"] == "interrupted"  # next: execute
    history = await client.post(f"/threads/{thread['thread_id']}/history", json={"limit": 10})
    assert len(history.json()) == 2
    state = (await client.get(f"/threads/{thread['thread_id']}/state")).json()
    assert state["next"] == ["execute"]

    r = await client.post("/threads", json={**body, "metadata": {}})
    assert r.status_code == 400 and "graph_id" in r.json()["detail"]
    bad = {
        "metadata": {"graph_id": "approval"},
        "supersteps": [{"updates": [{"values": {"request": "x"}, "as_node": "no_node"}]}],
    }
    before = (await client.post("/threads/count", json={})).json()
    r = await client.post("/threads", json=bad)
    assert r.status_code == 400
    assert (await client.post("/threads/count", json={})).json() == before  # rolled back
    r = await client.post(
        "/threads", json={**body, "thread_id": thread["thread_id"], "if_exists": "do_nothing"}
    )
    assert r.status_code == 200 and r.json()["values"] == thread["values"]
    r = await client.post("/threads", json={**body, "thread_id": thread["thread_id"]})
    assert r.status_code == 409


async def test_delta_channel_conversation_state(client: httpx.AsyncClient) -> None:
    """The long_conversation example keeps messages on a DeltaChannel: state is rebuilt from
    the saved writes, across many checkpoints, exactly as it was produced."""
    tid = (await new_thread(client, metadata={"graph_id": "long_conversation"}))["thread_id"]
    for turn in range(1, 8):
        await run_graph(
            client,
            "long_conversation",
            tid,
            {"messages": [{"role": "user", "content": f"m{turn}"}]},
        )
    state = (await client.get(f"/threads/{tid}/state")).json()
    contents = [m["content"] for m in state["values"]["messages"]]
    assert len(contents) == 14
    assert contents[-2:] == ["m7", "turn 7: m7"]
    history = (await client.post(f"/threads/{tid}/history", json={"limit": 100})).json()
    sizes = [len(h["values"].get("messages", [])) for h in history]
    assert sizes[0] == 14 and sizes == sorted(sizes, reverse=True)
    thread = (await client.get(f"/threads/{tid}")).json()
    assert thread["values"] is None  # the cache is written by runs and update_state only
    r = await client.post(
        f"/threads/{tid}/state",
        json={"values": {"messages": [{"role": "user", "content": "edited"}]}, "as_node": "reply"},
    )
    assert r.status_code == 200, r.text
    thread = (await client.get(f"/threads/{tid}")).json()
    assert len(thread["values"]["messages"]) == 15
