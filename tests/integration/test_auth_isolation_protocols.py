"""The cross-tenant matrix for /mcp and /a2a (not in the OpenAPI spec the generated matrix
walks): tenant B, pointed at tenant A's assistant, thread, runs and pending run, gets the
protocol's not-found answers, sees none of A's ids or marker, and A's data is unchanged."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.integration.isolation_support import (
    MARKER,
    Seed,
    Tenants,
    open_tenants,
    seed_tenant,
    snapshot,
)

MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture
async def seeded(db_url: str) -> AsyncIterator[tuple[Tenants, Seed]]:
    async with open_tenants(db_url) as t:
        yield t, await seed_tenant(t)


def _no_leak(r: httpx.Response, seed: Seed) -> None:
    sent = str(r.request.url) + r.request.content.decode()
    leaked = [s for s in [*seed.all_ids(), MARKER] if s in r.text and s not in sent]
    assert not leaked, f"{r.request.url.path}: {leaked} in {r.text[:300]}"
    assert r.status_code < 500, r.text


async def _mcp(c: httpx.AsyncClient, method: str, params: dict[str, Any]) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return await c.post("/mcp", json=body, headers=MCP_HEADERS)


async def _a2a(
    c: httpx.AsyncClient, assistant: str, method: str, params: dict[str, Any]
) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return await c.post(f"/a2a/{assistant}", json=body)


def _send(**message: Any) -> dict[str, Any]:
    parts = [{"kind": "text", "text": "hi"}]
    return {"message": {"role": "user", "messageId": str(uuid.uuid4()), "parts": parts, **message}}


async def test_protocols_do_not_cross_tenants(seeded: tuple[Tenants, Seed]) -> None:
    t, seed = seeded
    before = await snapshot(t, seed)
    a_assistant, a_thread = seed.ids["assistant_id"], seed.ids["thread_id"]
    a_runs = [seed.ids["run_id"], seed.ids["pending_run_id"]]
    b = t.b

    listed = await _mcp(b, "tools/list", {})
    _no_leak(listed, seed)
    assert "agent" in {tool["name"] for tool in listed.json()["result"]["tools"]}
    called = await _mcp(b, "tools/call", {"name": MARKER, "arguments": {}})
    _no_leak(called, seed)
    assert called.json()["error"]["code"] == -32602
    on_thread = await _mcp(
        b, "tools/call", {"name": "agent", "arguments": {}, "_meta": {"thread_id": a_thread}}
    )
    _no_leak(on_thread, seed)
    assert on_thread.json()["result"]["isError"] is True

    for path in (
        f"/a2a/{a_assistant}/.well-known/agent-card.json",
        f"/.well-known/agent-card.json?assistant_id={a_assistant}",
    ):
        card = await b.get(path)
        _no_leak(card, seed)
        assert card.status_code == 404
    service = await b.get("/.well-known/agent-card.json")
    _no_leak(service, seed)
    assert service.status_code == 200

    answers = [
        (await _a2a(b, a_assistant, "message/send", _send()), -32602),
        (await _a2a(b, "agent", "message/send", _send(contextId=a_thread)), -32602),
    ]
    for run_id in a_runs:
        for assistant in (a_assistant, "agent"):
            for method in ("tasks/get", "tasks/cancel"):
                answers.append((await _a2a(b, assistant, method, {"id": run_id}), -32001))
    for answer, code in answers:
        _no_leak(answer, seed)
        assert answer.json()["error"]["code"] == code, answer.text

    assert await snapshot(t, seed) == before
    # A still has its pending run and sees its own assistant as a tool
    mine = await _mcp(t.a, "tools/list", {})
    assert MARKER in {tool["name"] for tool in mine.json()["result"]["tools"]}
