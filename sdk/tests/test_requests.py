"""Every client method sends what the wire contract says (method, path, query, body) and
parses the answer into its model; run for both Client and AsyncClient."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fake_server import FakeServer, body_of, resolve

from graphkeep_client import (
    Assistant,
    Checkpoint,
    Command,
    Health,
    Item,
    Run,
    ServerInfo,
    Thread,
    ThreadState,
)

A = "6f2c8a52-8d0c-5b37-9b4e-0a1f9c1d2e3f"
T = "1f0c2d3e-4a5b-7c6d-8e9f-0a1b2c3d4e5f"
R = "1f0c2d3e-aaaa-7c6d-8e9f-0a1b2c3d4e5f"
CP = "1f1ec63e-d545-629c-8000-fca48b98b134"
TS = "2024-07-25T15:35:44.184703+00:00"

ASSISTANT = {
    "assistant_id": A,
    "graph_id": "agent",
    "name": "Agent",
    "description": None,
    "config": {"configurable": {"k": 1}},
    "context": {"k": 1},
    "metadata": {"owner": "me"},
    "version": 2,
    "created_at": TS,
    "updated_at": TS,
}
THREAD = {
    "thread_id": T,
    "created_at": TS,
    "updated_at": TS,
    "state_updated_at": TS,
    "metadata": {"graph_id": "agent"},
    "config": {},
    "status": "interrupted",
    "values": {"messages": []},
    "interrupts": {"task-1": [{"id": "i1", "value": {"question": "ok?"}}]},
}
STATE = {
    "values": {"messages": [{"type": "human", "content": "hi"}]},
    "next": ["review"],
    "tasks": [
        {
            "id": "task-1",
            "name": "review",
            "error": None,
            "interrupts": [{"id": "i1", "value": "ok?"}],
            "checkpoint": None,
            "state": None,
            "result": None,
        }
    ],
    "checkpoint": {"thread_id": T, "checkpoint_ns": "", "checkpoint_id": CP},
    "parent_checkpoint": None,
    "metadata": {"source": "loop", "step": 1},
    "created_at": TS,
    "interrupts": [{"id": "i1", "value": "ok?"}],
    "checkpoint_id": CP,
}
RUN = {
    "run_id": R,
    "thread_id": T,
    "assistant_id": A,
    "status": "pending",
    "metadata": {},
    "multitask_strategy": "enqueue",
    "kwargs": {"input": {}},
    "created_at": TS,
    "updated_at": TS,
}
ITEM = {"namespace": ["users", "u1"], "key": "k", "value": {"text": "likes tea"}}


@dataclass
class Case:
    id: str
    call: Any  # (client) -> result or awaitable
    method: str
    path: str
    reply: httpx.Response
    params: dict[str, Any] = field(default_factory=dict)
    body: Any = None  # expected JSON body; None = no body at all
    check: Any = None  # (result) -> None


def ok(data: Any, status: int = 200) -> httpx.Response:
    return httpx.Response(status, json=data)


NO_CONTENT = httpx.Response(204)

CASES = [
    # --- assistants
    Case(
        "assistants.get",
        lambda c: c.assistants.get(A),
        "GET",
        f"/assistants/{A}",
        ok(ASSISTANT),
        check=lambda r: r == Assistant.from_json(ASSISTANT) and r.version == 2,
    ),
    Case(
        "assistants.schemas",
        lambda c: c.assistants.schemas(A),
        "GET",
        f"/assistants/{A}/schemas",
        ok({"graph_id": "agent", "input_schema": {"type": "object"}}),
        check=lambda r: r["input_schema"] == {"type": "object"},
    ),
    Case(
        "assistants.create",
        lambda c: c.assistants.create(
            "agent", config={"recursion_limit": 5}, metadata={"a": 1}, name="x", if_exists="raise"
        ),
        "POST",
        "/assistants",
        ok(ASSISTANT),
        body={
            "graph_id": "agent",
            "config": {"recursion_limit": 5},
            "metadata": {"a": 1},
            "name": "x",
            "if_exists": "raise",
        },
        check=lambda r: r.assistant_id == A,
    ),
    Case(
        "assistants.update",
        lambda c: c.assistants.update(A, metadata={"b": 2}, context={"k": 2}),
        "PATCH",
        f"/assistants/{A}",
        ok(ASSISTANT),
        body={"metadata": {"b": 2}, "context": {"k": 2}},
    ),
    Case(
        "assistants.delete",
        lambda c: c.assistants.delete(A, delete_threads=True),
        "DELETE",
        f"/assistants/{A}",
        NO_CONTENT,
        params={"delete_threads": "true"},
        check=lambda r: r is None,
    ),
    Case(
        "assistants.search",
        lambda c: c.assistants.search(graph_id="agent", limit=5, sort_by="name", select=["name"]),
        "POST",
        "/assistants/search",
        ok([ASSISTANT, {"assistant_id": "x", "name": "only-name"}]),
        body={
            "graph_id": "agent",
            "limit": 5,
            "offset": 0,
            "sort_by": "name",
            "select": ["name"],
        },
        check=lambda r: [a.assistant_id for a in r] == [A, "x"] and r[1].graph_id == "",
    ),
    Case(
        "assistants.count",
        lambda c: c.assistants.count(metadata={"a": 1}),
        "POST",
        "/assistants/count",
        ok(3),
        body={"metadata": {"a": 1}},
        check=lambda r: r == 3,
    ),
    Case(
        "assistants.versions",
        lambda c: c.assistants.versions(A, limit=2),
        "POST",
        f"/assistants/{A}/versions",
        ok([ASSISTANT]),
        body={"limit": 2, "offset": 0},
        check=lambda r: r[0].version == 2,
    ),
    Case(
        "assistants.set_latest",
        lambda c: c.assistants.set_latest(A, 1),
        "POST",
        f"/assistants/{A}/latest",
        ok(ASSISTANT),
        body={"version": 1},
    ),
    # --- threads
    Case(
        "threads.create",
        lambda c: c.threads.create(thread_id=T, graph_id="agent", if_exists="do_nothing", ttl=5),
        "POST",
        "/threads",
        ok(THREAD),
        body={
            "thread_id": T,
            "metadata": {"graph_id": "agent"},
            "if_exists": "do_nothing",
            "ttl": {"ttl": 5, "strategy": "delete"},
        },
        check=lambda r: r.status == "interrupted" and r.interrupts["task-1"][0].id == "i1",
    ),
    Case(
        "threads.get",
        lambda c: c.threads.get(T, include_ttl=True),
        "GET",
        f"/threads/{T}",
        ok(THREAD),
        params={"include": "ttl"},
        check=lambda r: r.created_at == datetime(2024, 7, 25, 15, 35, 44, 184703, tzinfo=UTC),
    ),
    Case(
        "threads.update",
        lambda c: c.threads.update(T, metadata={"x": 1}),
        "PATCH",
        f"/threads/{T}",
        ok(THREAD),
        body={"metadata": {"x": 1}},
    ),
    Case("threads.delete", lambda c: c.threads.delete(T), "DELETE", f"/threads/{T}", NO_CONTENT),
    Case(
        "threads.search",
        lambda c: c.threads.search(status="idle", values={"a": 1}, ids=[T], offset=10),
        "POST",
        "/threads/search",
        ok([THREAD]),
        body={"status": "idle", "values": {"a": 1}, "ids": [T], "limit": 10, "offset": 10},
        check=lambda r: isinstance(r[0], Thread),
    ),
    Case(
        "threads.count",
        lambda c: c.threads.count(status="busy"),
        "POST",
        "/threads/count",
        ok(0),
        body={"status": "busy"},
        check=lambda r: r == 0,
    ),
    Case(
        "threads.copy",
        lambda c: c.threads.copy(T),
        "POST",
        f"/threads/{T}/copy",
        ok(THREAD),
        check=lambda r: r.thread_id == T,
    ),
    Case(
        "threads.prune",
        lambda c: c.threads.prune([T], keep_latest=True),
        "POST",
        "/threads/prune",
        ok({"pruned_count": 1}),
        body={"thread_ids": [T], "strategy": "keep_latest"},
        check=lambda r: r == 1,
    ),
    Case(
        "threads.get_state",
        lambda c: c.threads.get_state(T),
        "GET",
        f"/threads/{T}/state",
        ok(STATE),
        params={"subgraphs": "false"},
        check=lambda r: (
            r.next == ["review"]
            and r.tasks[0].interrupts[0].value == "ok?"
            and r.checkpoint == Checkpoint(thread_id=T, checkpoint_id=CP)
        ),
    ),
    Case(
        "threads.get_state(checkpoint_id)",
        lambda c: c.threads.get_state(T, checkpoint_id=CP, subgraphs=True),
        "GET",
        f"/threads/{T}/state/{CP}",
        ok(STATE),
        params={"subgraphs": "true"},
    ),
    Case(
        "threads.get_state(checkpoint)",
        lambda c: c.threads.get_state(T, checkpoint=Checkpoint(checkpoint_id=CP)),
        "POST",
        f"/threads/{T}/state/checkpoint",
        ok(STATE),
        body={"checkpoint": {"checkpoint_ns": "", "checkpoint_id": CP}, "subgraphs": False},
        check=lambda r: isinstance(r, ThreadState),
    ),
    Case(
        "threads.get_history",
        lambda c: c.threads.get_history(T, limit=3, before=CP, metadata={"source": "loop"}),
        "POST",
        f"/threads/{T}/history",
        ok([STATE, STATE]),
        body={"limit": 3, "before": CP, "metadata": {"source": "loop"}},
        check=lambda r: len(r) == 2 and r[0].metadata == {"source": "loop", "step": 1},
    ),
    Case(
        "threads.update_state(fork)",
        lambda c: c.threads.update_state(
            T, {"approved": True}, as_node="review", checkpoint=Checkpoint(checkpoint_id=CP)
        ),
        "POST",
        f"/threads/{T}/state",
        ok({"checkpoint": {"thread_id": T, "checkpoint_ns": "", "checkpoint_id": "new"}}),
        body={
            "values": {"approved": True},
            "as_node": "review",
            "checkpoint": {"checkpoint_ns": "", "checkpoint_id": CP},
        },
        check=lambda r: r.checkpoint_id == "new" and r.thread_id == T,
    ),
    # --- runs
    Case(
        "runs.create",
        lambda c: c.runs.create(
            T,
            "agent",
            input={"messages": []},
            metadata={"m": 1},
            config={"tags": ["t"]},
            context={"user": "u"},
            multitask_strategy="interrupt",
            if_not_exists="create",
            after_seconds=2,
            durability="sync",
            interrupt_before=["review"],
            interrupt_after="*",
            stream_mode=["values", "updates"],
            stream_subgraphs=True,
            stream_resumable=True,
        ),
        "POST",
        f"/threads/{T}/runs",
        ok(RUN),
        body={
            "assistant_id": "agent",
            "input": {"messages": []},
            "metadata": {"m": 1},
            "config": {"tags": ["t"]},
            "context": {"user": "u"},
            "multitask_strategy": "interrupt",
            "if_not_exists": "create",
            "after_seconds": 2,
            "durability": "sync",
            "interrupt_before": ["review"],
            "interrupt_after": "*",
            "stream_mode": ["values", "updates"],
            "stream_subgraphs": True,
            "stream_resumable": True,
        },
        check=lambda r: isinstance(r, Run) and not r.done,
    ),
    Case(
        "runs.create(stateless)",
        lambda c: c.runs.create(None, A, input=None, on_completion="keep"),
        "POST",
        "/runs",
        ok(RUN),
        body={"assistant_id": A, "on_completion": "keep"},
    ),
    Case(
        "runs.wait(command, checkpoint)",
        lambda c: c.runs.wait(
            T,
            "approval",
            command=Command(resume={"approved": True}),
            checkpoint={"checkpoint_id": CP, "checkpoint_ns": None},
        ),
        "POST",
        f"/threads/{T}/runs/wait",
        ok({"result": "done"}),
        body={
            "assistant_id": "approval",
            "command": {"resume": {"approved": True}},
            "checkpoint": {"checkpoint_id": CP, "checkpoint_ns": None},
        },
        check=lambda r: r == {"result": "done"},
    ),
    Case(
        "runs.join",
        lambda c: c.runs.join(T, R),
        "GET",
        f"/threads/{T}/runs/{R}/join",
        ok({"messages": []}),
        check=lambda r: r == {"messages": []},
    ),
    Case(
        "runs.cancel",
        lambda c: c.runs.cancel(T, R),
        "POST",
        f"/threads/{T}/runs/{R}/cancel",
        httpx.Response(202),
        params={"wait": "0", "action": "interrupt"},
        check=lambda r: r is None,
    ),
    Case(
        "runs.cancel(wait, rollback)",
        lambda c: c.runs.cancel(T, R, wait=True, action="rollback"),
        "POST",
        f"/threads/{T}/runs/{R}/cancel",
        ok({"a": 1}),
        params={"wait": "1", "action": "rollback"},
        check=lambda r: r == {"a": 1},
    ),
    Case(
        "runs.cancel_many",
        lambda c: c.runs.cancel_many(thread_id=T, run_ids=[R], action="rollback"),
        "POST",
        "/runs/cancel",
        NO_CONTENT,
        params={"action": "rollback"},
        body={"thread_id": T, "run_ids": [R]},
    ),
    Case(
        "runs.cancel_many(status)",
        lambda c: c.runs.cancel_many(status="pending"),
        "POST",
        "/runs/cancel",
        NO_CONTENT,
        params={"action": "interrupt"},
        body={"status": "pending"},
    ),
    Case(
        "runs.list",
        lambda c: c.runs.list(T, limit=5, status="success"),
        "GET",
        f"/threads/{T}/runs",
        ok([RUN]),
        params={"limit": "5", "offset": "0", "status": "success"},
        check=lambda r: r[0].run_id == R,
    ),
    Case("runs.get", lambda c: c.runs.get(T, R), "GET", f"/threads/{T}/runs/{R}", ok(RUN)),
    Case(
        "runs.delete", lambda c: c.runs.delete(T, R), "DELETE", f"/threads/{T}/runs/{R}", NO_CONTENT
    ),
    # --- store
    Case(
        "store.put",
        lambda c: c.store.put(("users", "u1"), "k", {"text": "x"}, index=False, ttl=10),
        "PUT",
        "/store/items",
        NO_CONTENT,
        body={
            "namespace": ["users", "u1"],
            "key": "k",
            "value": {"text": "x"},
            "index": False,
            "ttl": 10,
        },
    ),
    Case(
        "store.get",
        lambda c: c.store.get(["users", "u1"], "k", refresh_ttl=False),
        "GET",
        "/store/items",
        ok({**ITEM, "created_at": TS, "updated_at": TS}),
        params={"namespace": "users.u1", "key": "k", "refresh_ttl": "false"},
        check=lambda r: isinstance(r, Item) and r.namespace == ("users", "u1") and r.score is None,
    ),
    Case(
        "store.get(missing)",
        lambda c: c.store.get(["users"], "nope"),
        "GET",
        "/store/items",
        ok(None),
        params={"namespace": "users", "key": "nope"},
        check=lambda r: r is None,
    ),
    Case(
        "store.delete",
        lambda c: c.store.delete(["users", "u1"], "k"),
        "DELETE",
        "/store/items",
        NO_CONTENT,
        body={"namespace": ["users", "u1"], "key": "k"},
    ),
    Case(
        "store.search",
        lambda c: c.store.search(("users",), filter={"kind": "fact"}, query="tea", limit=3),
        "POST",
        "/store/items/search",
        ok({"items": [{**ITEM, "score": 0.75}]}),
        body={
            "namespace_prefix": ["users"],
            "filter": {"kind": "fact"},
            "query": "tea",
            "limit": 3,
            "offset": 0,
        },
        check=lambda r: r[0].score == 0.75 and r[0].value == {"text": "likes tea"},
    ),
    Case(
        "store.list_namespaces",
        lambda c: c.store.list_namespaces(prefix=["users"], max_depth=2),
        "POST",
        "/store/namespaces",
        ok({"namespaces": [["users", "u1"], ["users", "u2"]]}),
        body={"prefix": ["users"], "max_depth": 2, "limit": 100, "offset": 0},
        check=lambda r: r == [("users", "u1"), ("users", "u2")],
    ),
    # --- system
    Case(
        "health",
        lambda c: c.health(),
        "GET",
        "/ok",
        ok({"ok": True, "services": {"database": "healthy"}}),
        check=lambda r: r == Health(ok=True, services={"database": "healthy"}),
    ),
    Case(
        "info",
        lambda c: c.info(),
        "GET",
        "/info",
        ok({"version": "0.1.0", "flags": {"crons": False}}),
        check=lambda r: isinstance(r, ServerInfo) and r.flags == {"crons": False},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_request_shape_and_parsing(case: Case, server: FakeServer, client: Any) -> None:
    server.on(case.method, case.path, case.reply)
    result = await resolve(case.call(client))

    assert len(server.requests) == 1
    sent = server.requests[0]
    assert (sent.method, sent.url.path) == (case.method, case.path)
    assert dict(sent.url.params) == case.params
    assert body_of(sent) == case.body
    if case.body is not None:
        assert sent.headers["content-type"] == "application/json"
    else:
        assert "content-type" not in sent.headers  # copy and cancel send no body at all
    assert sent.headers["user-agent"].startswith("graphkeep-client/")
    if case.check is not None:
        assert case.check(result), result


def test_every_public_method_has_a_shape_case() -> None:
    """No method escapes the table above."""
    from graphkeep_client import Client

    client = Client("http://x")
    names = {"health", "info"}
    for group in ("assistants", "threads", "runs", "store"):
        resource = getattr(client, group)
        names |= {f"{group}.{m}" for m in dir(resource) if not m.startswith("_")}
    streams = {"runs.stream", "runs.join_stream", "threads.stream"}  # test_streams, _thread_stream
    covered = {c.id.split("(")[0] for c in CASES} | streams
    assert names - covered == set()


async def test_path_segments_are_percent_encoded(server: FakeServer, client: Any) -> None:
    server.on("GET", "/assistants/a/b", ok(ASSISTANT))  # url.path is decoded
    await resolve(client.assistants.get("a/b"))
    assert server.requests[0].url.raw_path == b"/assistants/a%2Fb"


async def test_misspelt_run_option_is_refused_before_sending(
    server: FakeServer, client: Any
) -> None:
    with pytest.raises(TypeError, match="streammode"):
        await resolve(client.runs.create(T, "agent", streammode="values"))
    assert server.requests == []


@pytest.mark.parametrize("namespace", [("a.b",), ("",), "users"])
async def test_bad_store_namespace_is_refused_before_sending(
    namespace: Any, server: FakeServer, client: Any
) -> None:
    with pytest.raises((ValueError, TypeError)):
        await resolve(client.store.get(namespace, "k"))
    assert server.requests == []
