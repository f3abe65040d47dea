"""Run options through the official SDK: stream modes, command, config/context, identity and
forwarded headers, stateless runs, batch, after_seconds, webhook, fork from history."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError
from langgraph_sdk.schema import Command

from tests.e2e import runs_fixtures
from tests.e2e.runs_fixtures import Live

pytestmark = pytest.mark.e2e
live = runs_fixtures.live  # one live server per dialect for this module


async def _events(client: Any, thread_id: str | None, graph: str, **kwargs: Any) -> list[Any]:
    return [p async for p in client.runs.stream(thread_id, graph, **kwargs)]


async def test_every_stream_mode_at_once(live: Live) -> None:
    client = get_client(url=live.url)
    thread = await client.threads.create()
    modes = ["values", "updates", "custom", "debug", "tasks", "checkpoints"]
    parts = await _events(
        client, thread["thread_id"], "writer", input={"count": 2}, stream_mode=modes
    )
    names = [p.event for p in parts]
    assert names[0] == "metadata"
    assert set(names[1:]) == set(modes)
    assert [p.data for p in parts if p.event == "custom"] == [{"i": 0}, {"i": 1}]
    tasks = [p.data for p in parts if p.event == "tasks"]
    assert {"id", "name", "input", "triggers"} <= set(tasks[0])
    assert any("result" in t for t in tasks)
    checkpoints = [p.data for p in parts if p.event == "checkpoints"]
    assert {"config", "metadata", "values", "next"} <= set(checkpoints[-1])
    assert {p.data["type"] for p in parts if p.event == "debug"} >= {"checkpoint", "task"}
    assert parts[-1].event in modes


async def test_messages_modes_reshaped_and_tuple(live: Live) -> None:
    client = get_client(url=live.url)
    thread = await client.threads.create()
    text = "hello there world"
    parts = await _events(
        client,
        thread["thread_id"],
        "chat",
        input={"messages": [{"role": "human", "content": text}]},
        stream_mode=["messages", "messages-tuple"],
    )
    names = [p.event for p in parts]
    first_meta = names.index("messages/metadata")
    assert first_meta < names.index("messages/partial")
    assert names.count("messages/metadata") == 1
    meta = parts[first_meta].data
    (msg_id,) = meta
    assert meta[msg_id]["metadata"]["langgraph_node"] == "reply"
    partial = [p.data for p in parts if p.event == "messages/partial"]
    assert partial, names
    assert partial[-1][0]["content"] == f"echo {text}"
    assert partial[-1][0]["type"] == "ai"
    assert len(partial[0][0]["content"]) < len(partial[-1][0]["content"])  # accumulated
    tuples = [p.data for p in parts if p.event == "messages"]
    assert "".join(chunk["content"] for chunk, _meta in tuples) == f"echo {text}"
    assert all(m["langgraph_node"] == "reply" for _c, m in tuples)


async def test_events_mode_and_subgraph_namespaces(live: Live) -> None:
    client = get_client(url=live.url)
    thread = await client.threads.create()
    parts = await _events(
        client,
        thread["thread_id"],
        "nested",
        input={"items": []},
        stream_mode=["updates"],
        stream_subgraphs=True,
    )
    names = [p.event for p in parts]
    assert "updates" in names
    sub = [n for n in names if n.startswith("updates|child:")]
    assert sub, names
    assert [p.data for p in parts if p.event in sub] == [{"child_step": {"items": ["child"]}}]
    parts = await _events(
        client, thread["thread_id"], "echo", input={"text": "e"}, stream_mode=["events", "values"]
    )
    kinds = [p.data["event"] for p in parts if p.event == "events"]
    assert "on_chain_start" in kinds and "on_chain_end" in kinds
    assert parts[-1].event in ("values", "events")
    assert any(p.event == "values" and p.data == {"text": "e"} for p in parts)


async def test_config_context_identity_and_forwarded_headers(live: Live) -> None:
    client = get_client(
        url=live.url, headers={"x-user-id": "u-7", "authorization": "Bearer secret-token"}
    )
    thread = await client.threads.create()
    out = await client.runs.wait(
        thread["thread_id"],
        "introspect",
        input={},
        config={
            "configurable": {"mine": "yes", "langgraph_auth_user_id": "forged"},
            "tags": ["t1"],
        },
    )
    seen = out["seen"]
    assert seen["x-user-id"] == "u-7"
    assert seen["user-agent"].startswith("langgraph-sdk-py")
    assert seen["authorization"] is None and seen["x-api-key"] is None
    assert seen["langgraph_auth_user_id"] == "anonymous"  # never the client's own value
    assert seen["tenant_id"] == "default"
    assert seen["mine"] == "yes"
    assert seen["graph_id"] == "introspect"
    assert seen["tags"] == ["t1"]
    out = await client.runs.wait(thread["thread_id"], "introspect", input={}, context={"k": 1})
    assert out["seen"]["context"] == {"k": 1}


async def test_command_update_and_goto_with_send(live: Live) -> None:
    client = get_client(url=live.url)
    thread = await client.threads.create()
    tid = thread["thread_id"]
    assert await client.runs.wait(tid, "jumps", input={"trail": []}) == {"trail": ["first"]}
    out = await client.runs.wait(
        tid, "jumps", command=Command(update={"trail": ["u"]}, goto="second")
    )
    assert out["trail"] == ["first", "u", "second"]
    # update as [key, value] pairs, goto as a Send ({node, input})
    out = await client.runs.wait(
        tid,
        "jumps",
        command={
            "update": [["trail", ["pair"]]],
            "goto": {"node": "first", "input": {"trail": []}},
        },
    )
    assert out["trail"] == ["first", "u", "second", "pair", "first"]


async def test_stateless_runs_and_on_completion(live: Live) -> None:
    client = get_client(url=live.url)
    out = await client.runs.wait(None, "echo", input={"text": "s"})
    assert out == {"text": "s"}
    parts = await _events(client, None, "echo", input={"text": "s2"})
    assert parts[0].event == "metadata" and parts[-1].data == {"text": "s2"}
    # delete (default): the temporary thread disappears; keep: it stays with the values.
    run = await client.runs.create(None, "echo", input={"text": "gone"})
    kept = await client.runs.create(None, "echo", input={"text": "kept"}, on_completion="keep")
    await client.runs.join(kept["thread_id"], kept["run_id"])
    thread = await client.threads.get(kept["thread_id"])
    assert thread["values"] == {"text": "kept"}
    for _ in range(100):
        try:
            await client.threads.get(run["thread_id"])
        except NotFoundError:
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("temporary thread was not deleted")
    batch = await client.runs.create_batch(
        [
            {"assistant_id": "echo", "input": {"text": str(i)}, "on_completion": "keep"}
            for i in range(3)
        ]
    )
    assert len({r["thread_id"] for r in batch}) == 3
    for i, r in enumerate(batch):
        assert await client.runs.join(r["thread_id"], r["run_id"]) == {"text": str(i)}


async def test_after_seconds_delays_start(live: Live) -> None:
    client = get_client(url=live.url)
    thread = await client.threads.create()
    run = await client.runs.create(
        thread["thread_id"], "echo", input={"text": "d"}, after_seconds=1.5
    )
    await asyncio.sleep(0.6)
    assert (await client.runs.get(thread["thread_id"], run["run_id"]))["status"] == "pending"
    assert (await client.threads.get(thread["thread_id"]))["status"] == "busy"
    assert await client.runs.join(thread["thread_id"], run["run_id"]) == {"text": "d"}
    assert (await client.threads.get(thread["thread_id"]))["status"] == "idle"


class _Hook(BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        _Hook.received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def webhook_url() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()


async def test_webhook_posted_and_failures_not_fatal(live: Live, webhook_url: str) -> None:
    client = get_client(url=live.url)
    thread = await client.threads.create()
    _Hook.received.clear()
    await client.runs.wait(thread["thread_id"], "echo", input={"text": "w"}, webhook=webhook_url)
    for _ in range(100):
        if _Hook.received:
            break
        await asyncio.sleep(0.05)
    assert _Hook.received and _Hook.received[0]["status"] == "success"
    assert _Hook.received[0]["thread_id"] == thread["thread_id"]
    # An unreachable webhook is logged, the run still succeeds.
    out = await client.runs.wait(
        thread["thread_id"], "echo", input={"text": "x"}, webhook="http://127.0.0.1:9/nothing"
    )
    assert out == {"text": "x"}


async def test_fork_and_replay_from_history(live: Live) -> None:
    client = get_client(url=live.url)
    thread = await client.threads.create()
    tid = thread["thread_id"]
    tag = uuid.uuid4().hex[:8]
    await client.runs.wait(tid, "steps", input={"tag": tag})
    history = await client.threads.get_history(tid, limit=10)
    # The checkpoint before node "b" ran.
    before_b = next(s for s in history if s["next"] == ["b"])
    forked = await client.runs.wait(
        tid, "steps", input=None, checkpoint_id=before_b["checkpoint"]["checkpoint_id"]
    )
    assert forked["trail"] == ["a", "b", "c"]
    recorded = live.records(tag)
    assert recorded == ["a", "b", "c", "b", "c"]  # nodes after the checkpoint ran again
    history2 = await client.threads.get_history(tid, limit=20)
    # The original branch is kept.
    ids = {s["checkpoint"]["checkpoint_id"] for s in history2}
    assert {s["checkpoint"]["checkpoint_id"] for s in history} <= ids
    # Fork with new input via `checkpoint` (the newer spelling): the state at that checkpoint
    # plus the input, then the graph runs again from START (LangGraph's semantics).
    await client.runs.wait(
        tid,
        "steps",
        input={"trail": ["x"]},
        checkpoint={"checkpoint_id": before_b["checkpoint"]["checkpoint_id"]},
    )
    state = await client.threads.get_state(tid)
    assert state["values"]["trail"] == ["a", "x", "a", "b", "c"]


async def test_durability_modes(live: Live) -> None:
    client = get_client(url=live.url)
    for durability in ("sync", "async", "exit"):
        thread = await client.threads.create()
        out = await client.runs.wait(
            thread["thread_id"], "steps", input={"tag": "d"}, durability=durability
        )
        assert out["trail"] == ["a", "b", "c"]
        history = await client.threads.get_history(thread["thread_id"], limit=20)
        if durability == "exit":
            assert len(history) == 1
        else:
            assert len(history) >= 4
    async with httpx.AsyncClient(base_url=live.url) as http:
        run = (
            await http.post(
                f"/threads/{thread['thread_id']}/runs",
                json={"assistant_id": "echo", "checkpoint_during": False},
            )
        ).json()
        assert run["kwargs"]["durability"] == "exit"


async def test_graph_uses_the_tenant_scoped_store(live: Live) -> None:
    client = get_client(url=live.url)
    thread = await client.threads.create()
    key = uuid.uuid4().hex[:8]
    out = await client.runs.wait(thread["thread_id"], "remember", input={"key": key, "text": "hi"})
    assert out["count"] >= 1
    item = await client.store.get_item(["memories", "anonymous"], key)
    assert item is not None and item["value"] == {"text": "hi"}
