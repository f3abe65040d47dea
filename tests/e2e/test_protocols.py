"""MCP and A2A against a live `graphkeep serve` in JWT mode, with the official clients.

One server per dialect (SQLite file, new PostgreSQL database), two tenants: `acme` owns a
custom assistant `acme-secret`, `globex` must neither list nor call it. The graphs are the
examples `agent` (echo) and `approval` (interrupts) and the test graph `steps` (sleeps).
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf import json_format, struct_pb2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from app.assistants.service import system_assistant_id
from app.db.storable import NOT_UTF8
from tests.authkit import AUDIENCE, HS_SECRET, ISSUER, bearer, claims, hs_token
from tests.conftest import create_pg_database, drop_pg_database
from tests.e2e.api_server import ROOT, clean_env, free_port, graphkeep
from tests.e2e.runs_server import wait_for_ok

pytestmark = pytest.mark.e2e

CONFIG = Path(__file__).with_name("protocols_graphs.json")
ACME = bearer(hs_token(claims(tenant="acme", sub="alice", ttl=3600)))
GLOBEX = bearer(hs_token(claims(tenant="globex", sub="bob", ttl=3600)))
A2A_V1 = {"A2A-Version": "1.0"}


@dataclass
class Server:
    url: str
    secret_assistant: str  # acme's own assistant


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp(f"protocols_{request.param}")
    if request.param == "sqlite":
        db_url = f"sqlite+aiosqlite:///{tmp / 'gk.db'}"
    else:
        db_url = create_pg_database("gk_protocols")
    env = clean_env(
        GRAPHKEEP_DATABASE_URL=db_url,
        GRAPHKEEP_CONFIG_FILE=str(CONFIG),
        GRAPHKEEP_WORKERS="2",
        GRAPHKEEP_AUTH="jwt",
        GRAPHKEEP_JWT_SECRET=HS_SECRET,
        GRAPHKEEP_JWT_ISSUER=ISSUER,
        GRAPHKEEP_JWT_AUDIENCE=AUDIENCE,
    )
    if request.param == "postgres":
        done = graphkeep("migrate", env=env)
        assert done.returncode == 0, done.stderr
    port = free_port()
    log = tmp / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_ok(proc, f"{url}/ok", lambda: log.read_text(errors="replace"))
        made = httpx.post(
            f"{url}/assistants", json={"graph_id": "agent", "name": "acme-secret"}, headers=ACME
        )
        assert made.status_code == 200, made.text
        yield Server(url=url, secret_assistant=made.json()["assistant_id"])
        assert "Traceback" not in log.read_text(errors="replace")
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:  # pragma: no cover - a hung server
            proc.kill()
        if request.param == "postgres":
            drop_pg_database(db_url)


# ---------------------------------------------------------------------- MCP


async def _mcp(url: str, headers: dict[str, str], calls: Any) -> Any:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await calls(session)


async def test_mcp_lists_and_calls_the_tenants_assistants(server: Server) -> None:
    async def calls(session: ClientSession) -> None:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert {"agent", "approval", "steps", "acme-secret"} <= set(tools)
        assert tools["agent"].description == "Echoes the last human message"
        # a list of LangChain messages is offered as the user's message (langgraph-api does so)
        assert tools["agent"].input_schema["properties"]["messages"]["type"] == "string"
        assert "$defs" not in tools["agent"].input_schema
        assert tools["approval"].input_schema["type"] == "object"

        said = await session.call_tool("agent", {"messages": "hi"})
        assert not said.is_error
        assert said.structured_content["messages"][-1]["content"] == "You said: hi"
        assert "You said: hi" in said.content[0].text

        asked = await session.call_tool("approval", {"request": "deploy"})
        assert not asked.is_error
        interrupt = asked.structured_content["__interrupt__"][0]["value"]
        assert interrupt["question"] == "Approve this action?"

        # on a thread named in _meta: the second call continues it
        thread = str(uuid.uuid4())
        for text in ("one", "two"):
            turn = await session.call_tool(
                "acme-secret",
                {"messages": [{"role": "user", "content": text}]},
                meta={"thread_id": thread},
            )
            assert not turn.is_error, turn.content
        assert [m["content"] for m in turn.structured_content["messages"]] == [
            "one",
            "You said: one",
            "two",
            "You said: two",
        ]

        failed = await session.call_tool("failing", {"tag": "t"})
        assert failed.is_error and "boom: t" in failed.content[0].text

        bad_thread = await session.call_tool("agent", {}, meta={"thread_id": "not-a-uuid"})
        assert bad_thread.is_error and "not a valid UUID" in bad_thread.content[0].text
        with pytest.raises(MCPError) as unknown:
            await session.call_tool("no-such-tool", {})
        assert unknown.value.code == -32602

    await _mcp(server.url, ACME, calls)


async def test_mcp_is_tenant_scoped(server: Server) -> None:
    acme_thread = httpx.post(f"{server.url}/threads", json={}, headers=ACME).json()["thread_id"]

    async def calls(session: ClientSession) -> None:
        names = {t.name for t in (await session.list_tools()).tools}
        assert "acme-secret" not in names and "agent" in names
        with pytest.raises(MCPError):
            await session.call_tool("acme-secret", {"messages": []})
        other = await session.call_tool("agent", {"messages": "x"}, meta={"thread_id": acme_thread})
        assert other.is_error and "not found" in other.content[0].text

    await _mcp(server.url, GLOBEX, calls)
    anonymous = httpx.post(f"{server.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert anonymous.status_code == 401


async def test_mcp_read_only_token_lists_but_cannot_call(server: Server) -> None:
    reader = bearer(hs_token(claims(tenant="acme", sub="carol", ttl=3600, scope="read")))

    async def calls(session: ClientSession) -> None:
        names = {t.name for t in (await session.list_tools()).tools}
        assert {"agent", "acme-secret"} <= names  # its tenant's tools, listed
        with pytest.raises(MCPError) as refused:
            await session.call_tool("agent", {"messages": "hi"})
        assert refused.value.code == -32600 and "write scope" in str(refused.value)

    await _mcp(server.url, reader, calls)
    # the rest of the API still refuses a read-only POST that writes
    thread = httpx.post(f"{server.url}/threads", json={}, headers=reader)
    assert thread.status_code == 403


def test_mcp_bad_input_gets_protocol_errors(server: Server) -> None:
    headers = {
        **ACME,
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    mcp = f"{server.url}/mcp"
    malformed = httpx.post(mcp, content=b"{not json", headers=headers)
    assert malformed.status_code == 400 and malformed.json()["error"]["code"] == -32700
    unknown = httpx.post(mcp, json={"jsonrpc": "2.0", "id": 1, "method": "nope"}, headers=headers)
    assert unknown.json()["error"]["code"] == -32601
    huge = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"x": "a" * 1_100_000}}
    assert httpx.post(mcp, json=huge, headers=headers).status_code == 413


# ---------------------------------------------------------------------- A2A


def _message(text: str | None = None, data: dict[str, Any] | None = None, **ids: str) -> Message:
    parts = []
    if text is not None:
        parts.append(Part(text=text))
    if data is not None:
        parts.append(Part(data=json_format.ParseDict(data, struct_pb2.Value())))
    return Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=parts, **ids)


async def _card(http: httpx.AsyncClient, url: str, assistant: str) -> AgentCard:
    return await A2ACardResolver(http, f"{url}/a2a/{assistant}").get_agent_card()


async def _send(
    http: httpx.AsyncClient, card: AgentCard, message: Message, **config: Any
) -> list[Any]:
    client = ClientFactory(ClientConfig(httpx_client=http, **config)).create(card)
    return [event async for event in client.send_message(SendMessageRequest(message=message))]


def _data(part: Part) -> Any:
    return json_format.MessageToDict(part.data)


async def test_a2a_card_send_and_stream_in_one_context(server: Server) -> None:
    async with httpx.AsyncClient(headers={**ACME, **A2A_V1}, timeout=30) as http:
        card = await _card(http, server.url, "agent")
        assert card.name == "agent" and card.capabilities.streaming
        assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
        endpoint = f"{server.url}/a2a/{system_assistant_id('agent')}"
        assert {(i.url, i.protocol_version) for i in card.supported_interfaces} == {
            (endpoint, "1.0"),
            (endpoint, "0.3"),
        }

        [first] = await _send(http, card, _message("hello"), streaming=False)
        task = first.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].text == "You said: hello"

        events = await _send(http, card, _message("again", context_id=task.context_id))
        kinds = [e.WhichOneof("payload") for e in events]
        assert kinds[0] == "task" and kinds[-1] == "status_update"
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        assert events[0].task.context_id == task.context_id
        # the model's tokens come as they stream, appended to one artifact, then the result
        updates = [e.artifact_update for e in events if e.HasField("artifact_update")]
        tokens = [u for u in updates if u.artifact.name == "stream"]
        assert len(tokens) > 1, "the reply streams in more than one token"
        assert [u.append for u in tokens] == [False] + [True] * (len(tokens) - 1)
        assert len({u.artifact.artifact_id for u in tokens}) == 1
        assert "".join(u.artifact.parts[0].text for u in tokens) == "You said: again"
        assert updates[-1].artifact.name == "result" and updates[-1].last_chunk
        assert updates[-1].artifact.parts[0].text == "You said: again"

        state = await http.get(f"{server.url}/threads/{task.context_id}/state")
        contents = [m["content"] for m in state.json()["values"]["messages"]]
        assert contents == ["hello", "You said: hello", "again", "You said: again"]

        # tasks/get on the first task; a 0.3 client (message/send) on the same endpoint
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert got.status.state == TaskState.TASK_STATE_COMPLETED
        legacy = AgentCard()
        legacy.CopyFrom(card)
        del legacy.supported_interfaces[0]  # leaves the 0.3 interface
        [old] = await _send(http, legacy, _message("v03"), streaming=False)
        assert old.task.artifacts[0].parts[0].text == "You said: v03"


async def test_a2a_interrupt_then_answer(server: Server) -> None:
    async with httpx.AsyncClient(headers={**ACME, **A2A_V1}, timeout=30) as http:
        card = await _card(http, server.url, "approval")
        [asked] = await _send(http, card, _message(data={"request": "deploy"}), streaming=False)
        task: Task = asked.task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert task.status.message.parts[0].text == "Approve this action?"

        answer = _message(
            data={"resume": {"approved": True}}, context_id=task.context_id, task_id=task.id
        )
        [done] = await _send(http, card, answer, streaming=False)
        assert done.task.status.state == TaskState.TASK_STATE_COMPLETED
        assert done.task.context_id == task.context_id
        assert _data(done.task.artifacts[0].parts[-1])["result"] == "done: execute: deploy"

        # the resumed task keeps its id: tasks/get of it answers the resumed run's state,
        # and the resumed run's own id is a way to the same task; both runs stay readable
        assert done.task.id == task.id
        resumed_run = json_format.MessageToDict(done.task.metadata)["run_id"]
        assert resumed_run != task.id
        client = ClientFactory(ClientConfig(httpx_client=http)).create(card)
        for asked_id in (task.id, resumed_run):
            got = await client.get_task(GetTaskRequest(id=asked_id))
            assert got.id == task.id
            assert got.status.state == TaskState.TASK_STATE_COMPLETED
            assert _data(got.artifacts[0].parts[-1])["result"] == "done: execute: deploy"
        for run_id in (task.id, resumed_run):
            run = await http.get(f"{server.url}/threads/{task.context_id}/runs/{run_id}")
            assert run.status_code == 200 and run.json()["status"] == "success"
        with pytest.raises(TaskNotCancelableError, match="ended"):
            await client.cancel_task(CancelTaskRequest(id=task.id))

        # the finished task takes no more messages
        with pytest.raises(UnsupportedOperationError):
            await _send(http, card, _message("more", task_id=done.task.id), streaming=False)


async def test_a2a_failed_run_is_a_failed_task(server: Server) -> None:
    async with httpx.AsyncClient(headers={**ACME, **A2A_V1}, timeout=30) as http:
        card = await _card(http, server.url, "failing")
        [failed] = await _send(http, card, _message(data={"tag": "t"}), streaming=False)
        assert failed.task.status.state == TaskState.TASK_STATE_FAILED
        assert "boom: t" in failed.task.status.message.parts[0].text
        client = ClientFactory(ClientConfig(httpx_client=http)).create(card)
        got = await client.get_task(GetTaskRequest(id=failed.task.id))
        assert got.status.state == TaskState.TASK_STATE_FAILED


async def test_a2a_cancel_a_long_task(server: Server) -> None:
    async with httpx.AsyncClient(headers={**ACME, **A2A_V1}, timeout=30) as http:
        card = await _card(http, server.url, "steps")
        [started] = await _send(
            http, card, _message(data={"sleep": 30}), streaming=False, polling=True
        )
        task = started.task
        assert task.status.state == TaskState.TASK_STATE_SUBMITTED
        client = ClientFactory(ClientConfig(httpx_client=http)).create(card)
        cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert got.status.state == TaskState.TASK_STATE_CANCELED
        run = await http.get(f"{server.url}/threads/{task.context_id}/runs/{task.id}")
        assert run.json()["status"] == "interrupted"
        with pytest.raises(TaskNotCancelableError, match="ended"):
            await client.cancel_task(CancelTaskRequest(id=task.id))


async def test_a2a_is_tenant_scoped(server: Server) -> None:
    secret = server.secret_assistant
    async with httpx.AsyncClient(headers={**ACME, **A2A_V1}, timeout=30) as http:
        card = await _card(http, server.url, secret)
        [mine] = await _send(http, card, _message("x"), streaming=False)
        mine_card = (await http.get(f"{server.url}/.well-known/agent-card.json")).json()
        assert secret in {s["id"] for s in mine_card["skills"]}
    async with httpx.AsyncClient(headers={**GLOBEX, **A2A_V1}, timeout=30) as http:
        assert (
            await http.get(f"{server.url}/a2a/{secret}/.well-known/agent-card.json")
        ).status_code == 404
        listing = (await http.get(f"{server.url}/.well-known/agent-card.json")).json()
        assert secret not in {s["id"] for s in listing["skills"]}
        assert "agent" in {s["name"] for s in listing["skills"]}
        one = await http.get(f"{server.url}/.well-known/agent-card.json?assistant_id={secret}")
        assert one.status_code == 404
        with pytest.raises(InvalidParamsError, match="not found"):
            await _send(http, card, _message("x"), streaming=False)
        agent = await _card(http, server.url, "agent")
        client = ClientFactory(ClientConfig(httpx_client=http)).create(agent)
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=mine.task.id))
        # acme's context (thread) is not globex's to continue
        with pytest.raises(InvalidParamsError, match="not found"):
            await _send(
                http, agent, _message("x", context_id=mine.task.context_id), streaming=False
            )
    state = httpx.get(f"{server.url}/threads/{mine.task.context_id}/state", headers=ACME).json()
    assert [m["content"] for m in state["values"]["messages"]] == ["x", "You said: x"]
    assert httpx.get(f"{server.url}/.well-known/agent-card.json").status_code == 401


def _rpc(server: Server, assistant: str, body: Any, **kw: Any) -> dict[str, Any]:
    kind = "json" if not isinstance(body, bytes) else "content"
    r = httpx.post(f"{server.url}/a2a/{assistant}", headers=ACME, timeout=30, **{kind: body}, **kw)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def test_a2a_bad_input_gets_protocol_errors(server: Server) -> None:
    send = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "message/send",
        "params": {
            "message": {"role": "user", "messageId": "m", "parts": [{"kind": "text", "text": "x"}]}
        },
    }
    assert _rpc(server, "agent", b"{nope")["error"]["code"] == -32700
    assert _rpc(server, "agent", {"hello": 1})["error"]["code"] == -32600
    assert _rpc(server, "agent", {**send, "method": "tasks/explode"})["error"]["code"] == -32601
    missing = _rpc(server, str(uuid.uuid4()), send)
    assert missing["id"] == 7 and missing["error"]["code"] == -32602
    assert "not found" in missing["error"]["message"]
    huge = {
        **send,
        "params": {
            "message": {
                **send["params"]["message"],
                "parts": [{"kind": "text", "text": "a" * 1_100_000}],
            }
        },
    }  # type: ignore[index]
    assert _rpc(server, "agent", huge)["error"]["code"] == -32600
    unknown_task = {
        "jsonrpc": "2.0",
        "id": 8,
        "method": "tasks/get",
        "params": {"id": str(uuid.uuid4())},
    }
    assert _rpc(server, "agent", unknown_task)["error"]["code"] == -32001
    empty = {**send, "params": {"message": {"role": "user", "messageId": "m", "parts": []}}}
    assert _rpc(server, "agent", empty)["error"]["code"] == -32602
    bad_context = {
        **send,
        "params": {"message": {**send["params"]["message"], "contextId": "nope"}},
    }  # type: ignore[index]
    assert _rpc(server, "agent", bad_context)["error"]["code"] == -32602


def test_a2a_body_of_any_content_type_is_checked(server: Server) -> None:
    """The A2A SDK decodes a body as JSON whatever its content type, and HTTP's boundary
    check reads only JSON ones: a `text/plain` body holding what storage cannot take gets
    the same refusal, as a JSON-RPC error, and starts nothing. Before, its NUL or NaN was an
    internal error (-32603) with a traceback logged, and an integer beyond 64 bits ran."""
    headers = {**ACME, "content-type": "text/plain"}
    url = f"{server.url}/a2a/agent"
    text = '{"kind": "text", "text": "x"}'
    part = {
        "NUL": ('{"kind": "text", "text": "a\\u0000"}', "text contains a NUL character"),
        "surrogate": ('{"kind": "text", "text": "\\ud800"}', "text contains a lone surrogate"),
        "overflow": (text + ', {"kind": "data", "data": {"n": 1' + "0" * 30 + "}}", "64-bit"),
        "NaN": (text + ', {"kind": "data", "data": {"n": NaN}}', "not finite"),
    }
    count = {"metadata": {}}
    before = httpx.post(f"{server.url}/threads/count", json=count, headers=ACME).json()
    for parts, problem in part.values():
        body = (
            '{"jsonrpc": "2.0", "id": 3, "method": "message/send", "params": {"message": '
            '{"role": "user", "messageId": "m", "parts": [' + parts + "]}}}"
        )
        r = httpx.post(url, content=body.encode(), headers=headers, timeout=30)
        assert r.status_code == 200, r.text
        error = r.json()["error"]
        assert error["code"] == -32600 and problem in error["message"], error
    r = httpx.post(url, content=b'{"jsonrpc": "2.0", "id": "\xff"}', headers=headers)
    assert r.json()["error"] == {"code": -32700, "message": NOT_UTF8}
    assert httpx.post(f"{server.url}/threads/count", json=count, headers=ACME).json() == before


def test_mcp_client_gone_cancels_its_run(server: Server) -> None:
    """A stateless JSON answer has no stream to notice a cancel on: the server watches the
    connection, and a client that goes away takes its run with it."""
    thread = str(uuid.uuid4())
    params = {"name": "steps", "arguments": {"sleep": 20}, "_meta": {"thread_id": thread}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    headers = {**ACME, "Accept": "application/json, text/event-stream"}
    with pytest.raises(httpx.TimeoutException):
        httpx.post(f"{server.url}/mcp", json=body, headers=headers, timeout=1.0)
    deadline = time.monotonic() + 10
    status = None
    while time.monotonic() < deadline:
        runs = httpx.get(f"{server.url}/threads/{thread}/runs", headers=ACME).json()
        status = runs[0]["status"] if runs else None
        if status == "interrupted":
            break
        time.sleep(0.2)
    assert status == "interrupted"
