"""Custom auth end to end: the official `langgraph_sdk` client against live `graphkeep serve`
processes, on SQLite and PostgreSQL, with a langgraph.json `auth.path`.

- the official tutorial project (examples/auth-owner-threads) served unchanged: two users
  neither see, search, count, stream, copy nor delete each other's threads, runs and crons;
- the test handlers (tests/integration/custom_auth/auth.py): 401/403 from the handlers with
  their JSON bodies, handler crashes (never 500, never access), the `$contains` operator,
  scoped Store namespaces, the tenant from the user's `org` field, and `ctx.user` reaching
  the graph (`langgraph_auth_user`, `runtime.server_info.user`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError

from tests.e2e.runs_server import ROOT, serve

pytestmark = pytest.mark.e2e

OWNER_EXAMPLE = ROOT / "examples" / "auth-owner-threads" / "langgraph.json"
TEST_AUTH = ROOT / "tests" / "integration" / "custom_auth" / "langgraph.json"
DIALECTS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def _database(request: pytest.FixtureRequest, tmp: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return f"sqlite+aiosqlite:///{tmp / 'custom-auth.db'}"


@pytest.fixture(scope="module", params=DIALECTS)
def example_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("custom_auth_example")
    env = {"GRAPHKEEP_CONFIG_FILE": str(OWNER_EXAMPLE)}
    with serve(_database(request, tmp), tmp, workers=1, env=env, name="example") as proc:
        assert proc.url is not None
        yield proc.url


@pytest.fixture(scope="module", params=DIALECTS)
def test_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("custom_auth_handlers")
    env = {"GRAPHKEEP_CONFIG_FILE": str(TEST_AUTH), "GRAPHKEEP_AUTH_TENANT_FIELD": "org"}
    with serve(_database(request, tmp), tmp, workers=1, env=env, name="handlers") as proc:
        assert proc.url is not None
        yield proc.url


def _client(url: str, token: str) -> Any:
    return get_client(url=url, api_key=None, headers={"Authorization": f"Bearer {token}"})


async def _not_found(call: Any) -> None:
    """A 404, as the SDK raises it (NotFoundError; runs.wait raises httpx's error)."""
    with pytest.raises((NotFoundError, httpx.HTTPStatusError)) as info:
        await call
    if isinstance(info.value, httpx.HTTPStatusError):
        assert info.value.response.status_code == 404, info.value.response.text


async def test_tutorial_owner_only_threads_runs_and_crons(example_url: str) -> None:
    alice, bob = _client(example_url, "user1-token"), _client(example_url, "user2-token")
    tag = str(uuid.uuid4())
    thread = await alice.threads.create(metadata={"tag": tag})
    assert thread["metadata"]["owner"] == "user1"  # the handler's metadata is stored
    tid = thread["thread_id"]
    run_input = {"messages": [{"role": "user", "content": "hello"}]}
    await alice.runs.wait(tid, "agent", input=run_input)
    run = (await alice.runs.list(tid))[0]
    cron = await alice.crons.create_for_thread(tid, "agent", schedule="0 0 1 1 *")

    # alice sees everything of hers
    assert (await alice.threads.get(tid))["thread_id"] == tid
    assert [t["thread_id"] for t in await alice.threads.search(metadata={"tag": tag})] == [tid]
    assert await alice.threads.count(metadata={"tag": tag}) == 1
    assert [c["cron_id"] for c in await alice.crons.search(thread_id=tid)] == [cron["cron_id"]]

    # bob: nothing of alice's, through any door
    await _not_found(bob.threads.get(tid))
    await _not_found(bob.threads.get_state(tid))
    await _not_found(bob.threads.get_history(tid))
    await _not_found(bob.threads.copy(tid))
    await _not_found(bob.threads.update(tid, metadata={"owner": "user2"}))
    await _not_found(bob.threads.delete(tid))
    await _not_found(bob.runs.list(tid))
    await _not_found(bob.runs.get(tid, run["run_id"]))
    await _not_found(bob.runs.wait(tid, "agent", input=run_input))
    await _not_found(bob.runs.create(tid, "agent", input=run_input))
    await _not_found(bob.runs.delete(tid, run["run_id"]))
    await _not_found(bob.crons.create_for_thread(tid, "agent", schedule="0 0 1 1 *"))
    await _not_found(bob.crons.delete(cron["cron_id"]))
    with pytest.raises(NotFoundError):
        async for _ in bob.runs.join_stream(tid, run["run_id"]):
            pass
    assert await bob.threads.search(metadata={"tag": tag}) == []
    # bob's own filter cannot widen his view: asking for user1's owner matches nothing
    assert await bob.threads.search(metadata={"owner": "user1"}) == []
    assert await bob.threads.count(metadata={"tag": tag}) == 0
    assert await bob.crons.search(thread_id=tid) == []
    assert await bob.crons.count(thread_id=tid) == 0

    # and alice's data is intact
    assert (await alice.threads.get(tid))["metadata"]["owner"] == "user1"
    assert len(await alice.runs.list(tid)) == 1
    assert len(await alice.crons.search(thread_id=tid)) == 1
    await alice.threads.delete(tid)
    await _not_found(alice.threads.get(tid))


async def test_tutorial_stream_and_openapi(example_url: str) -> None:
    alice, bob = _client(example_url, "user1-token"), _client(example_url, "user2-token")
    thread = await alice.threads.create()
    events = [
        part.event
        async for part in alice.runs.stream(
            thread["thread_id"], "agent", input={"messages": [{"role": "user", "content": "hi"}]}
        )
    ]
    assert "values" in events
    with pytest.raises(NotFoundError):
        async for _ in bob.runs.stream(thread["thread_id"], "agent", input={"messages": []}):
            pass
    async with httpx.AsyncClient(base_url=example_url) as http:
        r = await http.get("/threads/search")
        spec = (await http.get("/openapi.json")).json()
        info = (await http.get("/info")).json()
        refused = await http.post("/threads", json={})
    assert spec["security"] == [{"BearerAuth": []}]
    assert spec["components"]["securitySchemes"]["BearerAuth"]["scheme"] == "bearer"
    assert info["auth"] == {"kind": "custom", "path": "./auth.py:auth"}
    assert refused.status_code == 401 and refused.json() == {"detail": "Missing token"}
    assert r.status_code in (401, 405)


async def test_handler_statuses_never_500(test_url: str) -> None:
    async with httpx.AsyncClient(base_url=test_url) as http:

        def as_(token: str) -> dict[str, str]:
            return {"authorization": f"Bearer {token}"}

        none = await http.post("/threads", json={})
        bad = await http.post("/threads", json={}, headers=as_("who"))
        banned = await http.post("/threads", json={}, headers=as_("banned-is-not-a-user"))
        forbidden = await http.post("/threads", json={}, headers=as_("forbidden"))
        crash = await http.post("/threads", json={}, headers=as_("crash"))
        noident = await http.post("/threads", json={}, headers=as_("noident"))
        thread = (await http.post("/threads", json={}, headers=as_("alice"))).json()
        tid = thread["thread_id"]
        denied = await http.patch(
            f"/threads/{tid}", json={"metadata": {"deny": True}}, headers=as_("alice")
        )
        exploded = await http.patch(
            f"/threads/{tid}", json={"metadata": {"explode": True}}, headers=as_("alice")
        )
        after = (await http.get(f"/threads/{tid}", headers=as_("alice"))).json()
        # MCP reads a tenant's data without the user's filters: refused under custom auth
        mcp = await http.post(
            "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=as_("alice")
        )
    assert (none.status_code, none.json()) == (401, {"detail": "no token"})
    assert (bad.status_code, bad.json()) == (401, {"detail": "bad token"})
    assert bad.headers["www-authenticate"] == "Bearer"
    assert banned.status_code == 401
    assert (forbidden.status_code, forbidden.json()) == (403, {"detail": "banned user"})
    assert crash.status_code == 401 and "secret-token-crash" not in crash.text
    assert noident.status_code == 401
    assert (denied.status_code, denied.json()) == (403, {"detail": "Forbidden"})
    assert exploded.status_code == 403 and "handler bug" not in exploded.text
    assert "deny" not in after["metadata"] and "explode" not in after["metadata"]
    assert mcp.status_code == 403, mcp.text


async def test_contains_operator_and_tenant_field(test_url: str) -> None:
    alice, bob = _client(test_url, "alice"), _client(test_url, "bob")
    mallory = _client(test_url, "mallory")  # another tenant (org globex)
    name = f"shared-{uuid.uuid4()}"
    assistant = await alice.assistants.create("agent", name=name)
    assert assistant["metadata"]["readers"] == ["alice"]
    assert [a["name"] for a in await alice.assistants.search(name=name)] == [name]
    assert await bob.assistants.search(name=name) == []
    # alice shares it: bob's `$contains` filter now admits it in search
    await alice.assistants.update(assistant["assistant_id"], metadata={"readers": ["alice", "bob"]})
    assert [a["name"] for a in await bob.assistants.search(name=name)] == [name]
    assert await bob.assistants.count(name=name) == 1
    # ...but reading it by id is the owner filter's, and another tenant never sees it
    await _not_found(bob.assistants.get(assistant["assistant_id"]))
    assert await mallory.assistants.search(name=name) == []
    thread = await alice.threads.create()
    await _not_found(mallory.threads.get(thread["thread_id"]))


async def test_store_namespaces_are_scoped_per_user(test_url: str) -> None:
    alice, bob = _client(test_url, "alice"), _client(test_url, "bob")
    key = str(uuid.uuid4())
    await alice.store.put_item(["notes"], key, {"text": "alice's"})
    await bob.store.put_item(["notes"], key, {"text": "bob's"})
    assert (await alice.store.get_item(["notes"], key))["value"] == {"text": "alice's"}
    assert (await bob.store.get_item(["notes"], key))["value"] == {"text": "bob's"}
    found = await bob.store.search_items(["notes"])
    assert {i["value"]["text"] for i in found["items"]} == {"bob's"}
    # naming alice's real namespace still lands in bob's own
    assert (await bob.store.get_item(["alice", "notes"], key)) is None
    spaces = (await bob.store.list_namespaces())["namespaces"]
    assert spaces and all(ns[0] == "bob" for ns in spaces)
    await bob.store.delete_item(["notes"], key)
    assert (await alice.store.get_item(["notes"], key))["value"] == {"text": "alice's"}


async def test_user_reaches_the_graph(test_url: str) -> None:
    alice = _client(test_url, "alice")
    thread = await alice.threads.create()
    state = await alice.runs.wait(thread["thread_id"], "identity", input={})
    seen = state["seen"]
    assert seen["user_id"] == "alice" and seen["tenant_id"] == "acme"
    assert seen["server_info_identity"] == "alice"
    user = seen["auth_user"]
    assert user["identity"] == "alice" and user["org"] == "acme"
    assert user["permissions"] == ["threads:write"]
    assert user["method_seen"] == "POST" and user["path_seen"].endswith("/runs/wait")


async def test_thread_protocol_websocket_is_authorised(example_url: str) -> None:
    import websockets

    alice = _client(example_url, "user1-token")
    tid = (await alice.threads.create())["thread_id"]
    url = example_url.replace("http://", "ws://") + f"/threads/{tid}/stream/events"
    subscribe = {"id": 1, "method": "subscription.subscribe", "params": {"channels": ["lifecycle"]}}
    as_alice = {"Authorization": "Bearer user1-token"}
    async with websockets.connect(url, additional_headers=as_alice) as ws:
        await ws.send(json.dumps(subscribe))
        assert json.loads(await ws.recv())["type"] == "success"
    for headers in ({"Authorization": "Bearer user2-token"}, {}):
        with pytest.raises((websockets.InvalidStatus, websockets.ConnectionClosed)):
            async with websockets.connect(url, additional_headers=headers) as ws:
                await ws.send(json.dumps(subscribe))
                await ws.recv()
