"""The official langgraph_sdk (async and sync) against a live `graphkeep serve`.

Assistants, threads, state, history, update_state forks, copy, prune and the store, on an
embedded SQLite file and on PostgreSQL. Runs are covered by the runs e2e modules.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from tests.e2e.api_server import serve, serve_on_new_pg_database

pytestmark = pytest.mark.e2e


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def server_url(request: pytest.FixtureRequest, tmp_path_factory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp(f"sdk_{request.param}")
    if request.param == "sqlite":
        # a fresh file: the embedded database migrates itself on start
        with serve(f"sqlite+aiosqlite:///{tmp / 'gk.db'}", tmp / "serve.log") as url:
            yield url
        return
    with serve_on_new_pg_database("gk_e2e_api", tmp / "serve.log") as url:
        yield url


async def test_assistants(server_url: str) -> None:
    client = get_client(url=server_url)
    agent = await client.assistants.get(
        str(uuid.uuid5(uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8"), "agent"))
    )
    assert agent["graph_id"] == "agent" and agent["metadata"] == {"created_by": "system"}
    created = await client.assistants.create(
        "approval", config={"configurable": {"k": 1}}, metadata={"owner": "e2e"}, name="mine"
    )
    aid = created["assistant_id"]
    assert created["context"] == {"k": 1} and created["version"] == 1
    with pytest.raises(ConflictError):
        await client.assistants.create("approval", assistant_id=aid)
    same = await client.assistants.create("approval", assistant_id=aid, if_exists="do_nothing")
    assert same["assistant_id"] == aid
    updated = await client.assistants.update(aid, metadata={"v": 2}, name="renamed")
    assert updated["version"] == 2 and updated["metadata"] == {"owner": "e2e", "v": 2}
    versions = await client.assistants.get_versions(aid)
    assert [v["version"] for v in versions] == [2, 1]
    latest = await client.assistants.set_latest(aid, 1)
    assert latest["name"] == "mine"
    found = await client.assistants.search(metadata={"owner": "e2e"}, limit=1)
    assert [a["assistant_id"] for a in found] == [aid]
    page = await client.assistants.search(graph_id="approval", limit=1, response_format="object")
    assert len(page["assistants"]) == 1 and page["next"] == "1"
    assert await client.assistants.count(graph_id="approval") >= 2
    schemas = await client.assistants.get_schemas(aid)
    assert "request" in schemas["input_schema"]["properties"]
    drawing = await client.assistants.get_graph("approval")
    assert {"propose", "review", "execute"} <= {n["id"] for n in drawing["nodes"]}
    await client.assistants.delete(aid)
    with pytest.raises(NotFoundError):
        await client.assistants.get(aid)
    with pytest.raises(UnprocessableEntityError):
        await client.assistants.get("agent")


async def test_threads_state_history_fork_copy_prune(server_url: str) -> None:
    client = get_client(url=server_url)
    thread = await client.threads.create(graph_id="approval", metadata={"suite": "e2e"})
    tid = thread["thread_id"]
    assert thread["metadata"] == {"suite": "e2e", "graph_id": "approval"}
    assert (await client.threads.get(tid))["status"] == "idle"
    with pytest.raises(ConflictError):
        await client.threads.create(thread_id=tid)
    empty = await client.threads.get_state(tid)
    assert empty["values"] == {} and empty["checkpoint"] is None

    first = await client.threads.update_state(tid, {"request": "deploy"}, as_node="propose")
    assert set(first["checkpoint"]) >= {"thread_id", "checkpoint_ns", "checkpoint_id"}
    state = await client.threads.get_state(tid)
    assert state["next"] == ["review"] and state["values"] == {"request": "deploy"}
    second = await client.threads.update_state(tid, {"approved": True}, as_node="review")
    assert (await client.threads.get(tid))["status"] == "interrupted"

    # fork from the first checkpoint
    fork = await client.threads.update_state(
        tid, {"request": "rollback"}, as_node="propose", checkpoint=first["checkpoint"]
    )
    latest = await client.threads.get_state(tid)
    assert latest["checkpoint"]["checkpoint_id"] == fork["checkpoint"]["checkpoint_id"]
    assert latest["parent_checkpoint"]["checkpoint_id"] == first["checkpoint"]["checkpoint_id"]
    assert latest["values"] == {"request": "rollback"}
    at_second = await client.threads.get_state(tid, checkpoint=second["checkpoint"])
    assert at_second["values"]["approved"] is True
    by_id = await client.threads.get_state(tid, checkpoint_id=first["checkpoint"]["checkpoint_id"])
    assert by_id["values"] == {"request": "deploy"}

    history = await client.threads.get_history(tid, limit=10)
    assert [h["checkpoint"]["checkpoint_id"] for h in history][0] == fork["checkpoint"][
        "checkpoint_id"
    ]
    older = await client.threads.get_history(tid, limit=10, before=second["checkpoint"])
    assert [h["checkpoint"]["checkpoint_id"] for h in older] == [
        first["checkpoint"]["checkpoint_id"]
    ]
    updates = await client.threads.get_history(tid, metadata={"source": "update"}, limit=10)
    assert len(updates) == 3

    copied = await client.threads.copy(tid)
    assert copied["thread_id"] != tid and copied["values"] == {"request": "rollback"}
    copy_history = await client.threads.get_history(copied["thread_id"], limit=10)
    assert len(copy_history) == len(history)

    found = await client.threads.search(metadata={"suite": "e2e"}, limit=10)
    assert {t["thread_id"] for t in found} == {tid, copied["thread_id"]}
    assert await client.threads.count(metadata={"suite": "e2e"}) == 2
    assert await client.threads.count(values={"request": "rollback"}) >= 2
    await client.threads.update(tid, metadata={"extra": 1}, return_minimal=True)
    assert (await client.threads.get(tid))["metadata"]["extra"] == 1

    pruned = await client.threads.prune([copied["thread_id"]], strategy="keep_latest")
    assert pruned == {"pruned_count": 1}
    assert len(await client.threads.get_history(copied["thread_id"], limit=10)) == 1
    assert await client.threads.prune([copied["thread_id"]]) == {"pruned_count": 1}
    await client.threads.delete(tid)
    with pytest.raises(NotFoundError):
        await client.threads.get(tid)
    with pytest.raises(NotFoundError):
        await client.threads.copy(str(uuid.uuid4()))


async def test_store(server_url: str) -> None:
    client = get_client(url=server_url)
    ns = ["e2e", str(uuid.uuid4())]
    await client.store.put_item(ns, "k1", {"text": "hello", "n": 1})
    await client.store.put_item(ns, "k2", {"text": "bye", "n": 2}, ttl=60)
    item = await client.store.get_item(ns, "k1")
    assert item["value"] == {"text": "hello", "n": 1} and item["namespace"] == ns
    assert await client.store.get_item(ns, "missing") is None
    result = await client.store.search_items(ns, filter={"n": 2})
    assert [i["key"] for i in result["items"]] == ["k2"] and result["items"][0]["score"] is None
    namespaces = await client.store.list_namespaces(prefix=["e2e"])
    assert ns in namespaces["namespaces"]
    await client.store.delete_item(ns, "k1")
    assert await client.store.get_item(ns, "k1") is None


async def test_create_with_supersteps(server_url: str) -> None:
    client = get_client(url=server_url)
    thread = await client.threads.create(
        graph_id="approval",
        supersteps=[{"updates": [{"values": {"request": "deploy"}, "as_node": "propose"}]}],
    )
    assert thread["values"] == {"request": "deploy"} and thread["status"] == "interrupted"
    state = await client.threads.get_state(thread["thread_id"])
    assert state["next"] == ["review"]


def test_sync_client(server_url: str) -> None:
    client = get_sync_client(url=server_url)
    thread = client.threads.create(graph_id="approval")
    client.threads.update_state(thread["thread_id"], {"request": "x"}, as_node="propose")
    state = client.threads.get_state(thread["thread_id"])
    assert state["next"] == ["review"]
    assert len(client.threads.get_history(thread["thread_id"])) == 1
    copied = client.threads.copy(thread["thread_id"])
    assert copied["values"] == {"request": "x"}
    assert client.assistants.search(graph_id="agent")[0]["graph_id"] == "agent"
    ns = ["sync", str(uuid.uuid4())]
    client.store.put_item(ns, "k", {"v": 1})
    assert client.store.get_item(ns, "k")["value"] == {"v": 1}
    assert client.threads.prune([thread["thread_id"], copied["thread_id"]]) == {"pruned_count": 2}


async def test_remote_graph_state_and_history(server_url: str) -> None:
    from langgraph.pregel.remote import RemoteGraph

    thread = await get_client(url=server_url).threads.create(graph_id="approval")
    remote = RemoteGraph("approval", url=server_url)
    config = {"configurable": {"thread_id": thread["thread_id"]}}
    first = await remote.aupdate_state(config, {"request": "deploy"}, as_node="propose")
    second = await remote.aupdate_state(config, {"approved": True}, as_node="review")
    assert first["configurable"]["checkpoint_id"] != second["configurable"]["checkpoint_id"]
    snapshot = await remote.aget_state(config)
    assert snapshot.values == {"request": "deploy", "approved": True}
    assert snapshot.next == ("execute",)
    assert (
        snapshot.config["configurable"]["checkpoint_id"] == second["configurable"]["checkpoint_id"]
    )
    history = [s async for s in remote.aget_state_history(config, limit=5)]
    assert len(history) == 2
    # RemoteGraph sends `before` as a flat checkpoint dict
    older = [s async for s in remote.aget_state_history(config, before=history[0].config)]
    assert [s.config["configurable"]["checkpoint_id"] for s in older] == [
        first["configurable"]["checkpoint_id"]
    ]
    drawing = await remote.aget_graph()
    assert {"propose", "review", "execute"} <= set(drawing.nodes)
