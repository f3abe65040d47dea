"""Typed run parameters: what the official SDK sends works, anything else is a 422 that
changes nothing (a cancel with an unknown `action` used to mean "interrupt")."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from app.statuses import RunStatus
from tests.integration.apiclient import api_client


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(db_url) as client:
        yield client


async def _pending_run(client: httpx.AsyncClient) -> tuple[str, str]:
    """A run nobody executes (no workers): it stays pending until cancelled."""
    thread = (await client.post("/threads", json={})).json()["thread_id"]
    assistants = (await client.post("/assistants/search", json={"limit": 1})).json()
    created = await client.post(
        f"/threads/{thread}/runs", json={"assistant_id": assistants[0]["assistant_id"]}
    )
    assert created.status_code == 200, created.text
    return thread, created.json()["run_id"]


async def _status(client: httpx.AsyncClient, thread: str, run: str) -> str:
    status: str = (await client.get(f"/threads/{thread}/runs/{run}")).json()["status"]
    return status


@pytest.mark.parametrize(
    "query",
    ["action=stop", "action=Interrupt", "action=", "wait=maybe", "wait=2", "wait="],
)
async def test_a_bad_cancel_parameter_is_a_422_and_cancels_nothing(
    client: httpx.AsyncClient, query: str
) -> None:
    thread, run = await _pending_run(client)
    answer = await client.post(f"/threads/{thread}/runs/{run}/cancel?{query}")
    assert answer.status_code == 422, answer.text
    name = query.split("=")[0]
    assert name in answer.json()["detail"]
    assert await _status(client, thread, run) == RunStatus.PENDING


@pytest.mark.parametrize(
    "query",
    [
        "",
        "wait=0",
        "wait=false",
        "action=interrupt&wait=0",  # langgraph_sdk: {"wait": 0, "action": "interrupt"}
        "action=rollback",
    ],
)
async def test_what_the_sdks_send_cancels(client: httpx.AsyncClient, query: str) -> None:
    thread, run = await _pending_run(client)
    answer = await client.post(f"/threads/{thread}/runs/{run}/cancel?{query}")
    assert answer.status_code == 202, answer.text
    if "rollback" in query:  # a rolled-back run is gone with its checkpoints
        assert (await client.get(f"/threads/{thread}/runs/{run}")).status_code == 404
    else:
        assert await _status(client, thread, run) == RunStatus.INTERRUPTED


@pytest.mark.parametrize("wait", ["1", "true", "True"])
async def test_cancel_and_wait_answers_with_the_final_state(
    client: httpx.AsyncClient, wait: str
) -> None:
    thread, run = await _pending_run(client)
    answer = await client.post(f"/threads/{thread}/runs/{run}/cancel?wait={wait}")
    assert answer.status_code == 200, answer.text
    assert answer.headers["location"] == f"/threads/{thread}/runs/{run}/join"
    assert await _status(client, thread, run) == RunStatus.INTERRUPTED


async def test_cancel_many_rejects_an_unknown_action(client: httpx.AsyncClient) -> None:
    thread, run = await _pending_run(client)
    body = {"thread_id": thread, "run_ids": [run]}
    bad = await client.post("/runs/cancel?action=halt", json=body)
    assert bad.status_code == 422, bad.text
    assert await _status(client, thread, run) == RunStatus.PENDING
    good = await client.post("/runs/cancel?action=interrupt", json=body)
    assert good.status_code == 204, good.text
    assert await _status(client, thread, run) == RunStatus.INTERRUPTED


@pytest.mark.parametrize("path", ["join", "stream"])
async def test_join_rejects_a_bad_cancel_on_disconnect(
    client: httpx.AsyncClient, path: str
) -> None:
    thread, run = await _pending_run(client)
    bad = await client.get(f"/threads/{thread}/runs/{run}/{path}?cancel_on_disconnect=sometimes")
    assert bad.status_code == 422, bad.text
    assert "cancel_on_disconnect" in bad.json()["detail"]
    assert await _status(client, thread, run) == RunStatus.PENDING
