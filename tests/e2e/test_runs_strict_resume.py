"""`strict_resume` through the official SDK against a live server (SQLite and PostgreSQL).

A resume that answers no pending interrupt is refused (409 when the thread has nothing in
flight, so nothing is created; a run queued behind others fails with LangGraph's
`UnknownInterruptError`), and the thread is left as it was. `/info` advertises the flag.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import ConflictError
from langgraph_sdk.schema import Command

from tests.e2e import runs_fixtures
from tests.e2e.runs_fixtures import Live

pytestmark = pytest.mark.e2e
live = runs_fixtures.live

UNKNOWN_ID = "0" * 32  # shaped like a LangGraph interrupt id, answers nothing


async def _interrupted(client: Any) -> tuple[str, str]:
    """A thread stopped at `asker`'s interrupt; (thread_id, interrupt_id)."""
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "asker", input={"tag": uuid.uuid4().hex[:6], "question": "q?"})
    thread = await client.threads.get(tid)
    assert thread["status"] == "interrupted"
    [items] = thread["interrupts"].values()
    return tid, items[0]["id"]


async def test_info_advertises_strict_resume(live: Live) -> None:
    async with httpx.AsyncClient(base_url=live.url) as http:
        assert (await http.get("/info")).json()["flags"]["strict_resume"] is True


async def test_unknown_interrupt_is_refused_and_thread_kept(live: Live) -> None:
    client = get_client(url=live.url)
    tid, _ = await _interrupted(client)
    before = await client.threads.get_state(tid)
    runs_before = await client.runs.list(tid)
    for resume in ({UNKNOWN_ID: "x"}, {}):
        with pytest.raises(ConflictError) as err:
            await client.runs.create(
                tid, "asker", command=Command(resume=resume), strict_resume=True
            )
        assert "UnknownInterruptError" in str(err.value)
    # the stream and wait routes refuse it the same way, before any stream starts
    with pytest.raises(ConflictError):
        async for _ in client.runs.stream(
            tid, "asker", command=Command(resume={UNKNOWN_ID: "x"}), strict_resume=True
        ):
            pass
    with pytest.raises(httpx.HTTPStatusError) as status:
        await client.runs.wait(
            tid, "asker", command=Command(resume={UNKNOWN_ID: "x"}), strict_resume=True
        )
    assert status.value.response.status_code == 409
    # nothing was created, the thread is exactly as it was
    assert await client.runs.list(tid) == runs_before
    thread = await client.threads.get(tid)
    assert thread["status"] == "interrupted"
    after = await client.threads.get_state(tid)
    assert after["checkpoint"] == before["checkpoint"]
    assert after["interrupts"] == before["interrupts"]


async def test_matching_resume_is_accepted(live: Live) -> None:
    client = get_client(url=live.url)
    tid, interrupt_id = await _interrupted(client)
    out = await client.runs.wait(
        tid, "asker", command=Command(resume={interrupt_id: "yes"}), strict_resume=True
    )
    assert out["answer"] == "yes!"
    # a single value answers the one pending interrupt too
    tid2, _ = await _interrupted(client)
    out2 = await client.runs.wait(tid2, "asker", command=Command(resume="sure"), strict_resume=True)
    assert out2["answer"] == "sure!"
    run = (await client.runs.list(tid2))[0]
    assert run["kwargs"]["strict_resume"] is True


async def test_without_strict_resume_an_unknown_id_is_ignored(live: Live) -> None:
    client = get_client(url=live.url)
    tid, interrupt_id = await _interrupted(client)
    out = await client.runs.wait(tid, "asker", command=Command(resume={UNKNOWN_ID: "x"}))
    assert "__error__" not in out
    thread = await client.threads.get(tid)
    assert thread["status"] == "interrupted"  # still waiting for its answer
    [items] = thread["interrupts"].values()
    assert items[0]["id"] == interrupt_id


async def test_queued_strict_resume_fails_with_unknown_interrupt(live: Live) -> None:
    client = get_client(url=live.url)
    tid, interrupt_id = await _interrupted(client)
    # `first` waits a second before it starts, so the thread is surely busy meanwhile
    first = await client.runs.create(tid, "asker", command=Command(resume="first"), after_seconds=1)
    # queued behind `first` (the thread is busy): judged when it runs, after `first`
    # consumed the interrupt
    late = await client.runs.create(
        tid,
        "asker",
        command=Command(resume={interrupt_id: "late"}),
        strict_resume=True,
        after_seconds=1.5,  # starts after `first`
    )
    out = await client.runs.join(tid, late["run_id"])
    assert out["__error__"]["error"] == "UnknownInterruptError"
    assert (await client.runs.get(tid, first["run_id"]))["status"] == "success"
    assert (await client.runs.get(tid, late["run_id"]))["status"] == "error"
    # nothing of the refused resume was written
    state = await client.threads.get_state(tid)
    assert state["values"]["answer"] == "first!"
    assert state["next"] == []
