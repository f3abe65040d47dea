"""Run endpoints through the official langgraph_sdk against a live server (SQLite and PG).

Create, stream, wait, join, join-stream with Last-Event-ID, list/get/delete, interrupts and
resume, errors, headers: what a user of the SDK sees.
"""

from __future__ import annotations

import uuid

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import BadRequestError, NotFoundError, UnprocessableEntityError
from langgraph_sdk.schema import Command

from tests.e2e import runs_fixtures
from tests.e2e.runs_fixtures import Live

pytestmark = pytest.mark.e2e
live = runs_fixtures.live  # one live server per dialect for this module


def tag() -> str:
    return uuid.uuid4().hex[:10]


async def test_wait_returns_final_values_and_settles_thread(live: Live) -> None:
    client = get_client(url=live.url)
    thread = await client.threads.create()
    t = tag()
    out = await client.runs.wait(thread["thread_id"], "steps", input={"tag": t})
    assert out["trail"] == ["a", "b", "c"]
    got = await client.threads.get(thread["thread_id"])
    assert got["status"] == "idle"
    assert got["values"]["trail"] == ["a", "b", "c"]
    assert got["metadata"]["graph_id"] == "steps"
    runs = await client.runs.list(thread["thread_id"])
    assert [r["status"] for r in runs] == ["success"]
    assert live.records(t) == ["a", "b", "c"]


async def test_stream_events_in_order_with_metadata_first(live: Live) -> None:
    client = get_client(url=live.url)
    thread = await client.threads.create()
    parts = [
        p
        async for p in client.runs.stream(
            thread["thread_id"], "steps", input={"tag": tag()}, stream_mode=["values", "updates"]
        )
    ]
    assert parts[0].event == "metadata"
    assert parts[0].data["attempt"] == 1
    run_id = parts[0].data["run_id"]
    names = [p.event for p in parts[1:]]
    assert names == ["values", "updates", "values", "updates", "values", "updates", "values"]
    assert [list(p.data) for p in parts[1:] if p.event == "updates"] == [["a"], ["b"], ["c"]]
    assert parts[-1].data["trail"] == ["a", "b", "c"]
    # Final status is committed before the stream closes.
    run = await client.runs.get(thread["thread_id"], run_id)
    assert run["status"] == "success"
    assert "end" not in names


async def test_create_then_join_and_join_stream_resume(live: Live) -> None:
    client = get_client(url=live.url)
    thread = await client.threads.create()
    run = await client.runs.create(
        thread["thread_id"],
        "steps",
        input={"tag": tag(), "sleep": 0.3},
        stream_mode=["updates"],
        stream_resumable=True,
    )
    # the run as written: `running` when a free local worker slot took it at once
    assert run["status"] in ("pending", "running")
    assert run["kwargs"]["resumable"] is True
    out = await client.runs.join(thread["thread_id"], run["run_id"])
    assert out["trail"] == ["a", "b", "c"]
    # Replay from the start, then from after a given event id.
    full = [
        p
        async for p in client.runs.join_stream(
            thread["thread_id"], run["run_id"], last_event_id="-1"
        )
    ]
    assert [p.event for p in full] == ["metadata", "updates", "updates", "updates"]
    ids = [p.id for p in full]
    assert all(ids) and ids == sorted(ids, key=int)
    tail = [
        p
        async for p in client.runs.join_stream(
            thread["thread_id"], run["run_id"], last_event_id=ids[1]
        )
    ]
    assert [p.id for p in tail] == ids[2:]
    assert [list(p.data) for p in tail] == [["b"], ["c"]]
    # A filter on the join stream keeps only matching modes (metadata is hidden then).
    only = [
        p
        async for p in client.runs.join_stream(
            thread["thread_id"], run["run_id"], last_event_id="0", stream_mode="updates"
        )
    ]
    assert [p.event for p in only] == ["updates"] * 3


async def test_non_resumable_runs_send_no_ids(live: Live) -> None:
    client = get_client(url=live.url)
    thread = await client.threads.create()
    parts = [p async for p in client.runs.stream(thread["thread_id"], "echo", input={"text": "x"})]
    assert [p.event for p in parts] == ["metadata", "values", "values"]
    assert all(p.id is None for p in parts)


async def test_headers_location_and_content_location(live: Live) -> None:
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        tid = (await http.post("/threads", json={})).json()["thread_id"]
        body = {"assistant_id": "echo", "input": {"text": "h"}}
        r = await http.post(f"/threads/{tid}/runs", json=body)
        run_id = r.json()["run_id"]
        assert r.headers["content-location"] == f"/threads/{tid}/runs/{run_id}"
        r = await http.post(f"/threads/{tid}/runs/wait", json=body)
        loc = r.headers["content-location"]
        assert loc.startswith(f"/threads/{tid}/runs/")
        assert r.headers["location"] == f"{loc}/join"
        assert r.json() == {"text": "h"}
        async with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as s:
            assert s.headers["content-type"].startswith("text/event-stream")
            loc = s.headers["content-location"]
            assert s.headers["location"] == f"{loc}/stream"
            text = (await s.aread()).decode()
        assert text.startswith("event: metadata\r\ndata: {")
        r = await http.post("/runs/wait", json=body)
        assert r.headers["location"].endswith("/join")
        assert r.headers["content-location"].startswith("/threads/")
        r = await http.post("/runs", json=body)
        assert r.headers["content-location"] == f"/runs/{r.json()['run_id']}"
        async with http.stream("POST", "/runs/stream", json=body) as s:
            rid = s.headers["content-location"].rsplit("/", 1)[1]
            assert s.headers["location"] == f"/runs/{rid}/stream"
            await s.aread()


async def test_interrupt_then_resume_with_command(live: Live) -> None:
    client = get_client(url=live.url)
    thread = await client.threads.create()
    t = tag()
    out = await client.runs.wait(thread["thread_id"], "asker", input={"tag": t, "question": "q?"})
    assert out["__interrupt__"][0]["value"] == {"question": "q?"}
    got = await client.threads.get(thread["thread_id"])
    assert got["status"] == "interrupted"
    assert [i["value"] for items in got["interrupts"].values() for i in items] == [
        {"question": "q?"}
    ]
    runs = await client.runs.list(thread["thread_id"])
    assert runs[0]["status"] == "success"
    parts = [
        p
        async for p in client.runs.stream(
            thread["thread_id"], "asker", command=Command(resume="yes"), stream_mode="updates"
        )
    ]
    assert parts[-1].data == {"after": {"answer": "yes!"}}
    got = await client.threads.get(thread["thread_id"])
    assert got["status"] == "idle"
    assert got["values"]["answer"] == "yes!"
    assert got["interrupts"] == {}
    assert live.records(t) == ["ask", "after"]


async def test_interrupt_before_and_continue_with_null_input(live: Live) -> None:
    client = get_client(url=live.url)
    thread = await client.threads.create()
    t = tag()
    await client.runs.wait(thread["thread_id"], "steps", input={"tag": t}, interrupt_before=["b"])
    assert (await client.threads.get(thread["thread_id"]))["status"] == "interrupted"
    state = await client.threads.get_state(thread["thread_id"])
    assert state["next"] == ["b"]
    out = await client.runs.wait(thread["thread_id"], "steps", input=None)
    assert out["trail"] == ["a", "b", "c"]
    assert live.records(t) == ["a", "b", "c"]


async def test_failure_gives_error_event_status_and_thread_error(live: Live) -> None:
    client = get_client(url=live.url)
    thread = await client.threads.create()
    parts = [
        p async for p in client.runs.stream(thread["thread_id"], "failing", input={"tag": "x"})
    ]
    assert parts[-1].event == "error"
    assert parts[-1].data == {"error": "ValueError", "message": "boom: x"}
    run = await client.runs.get(thread["thread_id"], parts[0].data["run_id"])
    assert run["status"] == "error"
    assert (await client.threads.get(thread["thread_id"]))["status"] == "error"
    with pytest.raises(Exception, match="boom"):
        await client.runs.wait(thread["thread_id"], "failing", input={"tag": "y"})
    raw = await client.runs.wait(
        thread["thread_id"], "failing", input={"tag": "z"}, raise_error=False
    )
    assert raw == {"__error__": {"error": "ValueError", "message": "boom: z"}}
    # join of a run that already ended: the thread's error
    joined = await client.runs.join(thread["thread_id"], run["run_id"])
    assert joined["__error__"]["error"] == "ValueError"


async def test_bad_requests_are_4xx(live: Live) -> None:
    client = get_client(url=live.url)
    thread = await client.threads.create()
    tid = thread["thread_id"]
    with pytest.raises(NotFoundError):
        await client.runs.create(str(uuid.uuid4()), "echo", input={})
    with pytest.raises(NotFoundError):
        await client.runs.create(tid, "no-such-graph", input={})
    with pytest.raises(BadRequestError):
        await client.runs.create(tid, "echo", config={"configurable": {"a": 1}}, context={"b": 2})
    with pytest.raises(UnprocessableEntityError):
        await client.runs.create(tid, "echo", stream_mode="tools")  # type: ignore[arg-type]
    with pytest.raises(UnprocessableEntityError):
        await client.runs.create(tid, "echo", checkpoint_id="not-a-uuid")
    with pytest.raises(BadRequestError):
        await client.runs.create(None, "asker", command=Command(resume="x"))
    async with httpx.AsyncClient(base_url=live.url) as http:
        r = await http.get(f"/threads/{tid}/runs/not-a-uuid")
        assert r.status_code == 422 and isinstance(r.json()["detail"], str)
        r = await http.post(f"/threads/{tid}/runs", json={"input": {}})
        assert r.status_code == 422 and isinstance(r.json()["detail"], str)
        r = await http.get(f"/threads/{tid}/runs", params={"select": "nope"})
        assert r.status_code == 422
        r = await http.get(
            f"/threads/{tid}/runs/{uuid.uuid4()}/stream", headers={"Last-Event-ID": "x!"}
        )
        assert r.status_code == 422
        r = await http.post(f"/threads/{tid}/runs/{uuid.uuid4()}/cancel")
        assert r.status_code == 404
        r = await http.post("/runs/cancel", json={"status": "all", "run_ids": [], "thread_id": tid})
        assert r.status_code == 422
        r = await http.get(f"/threads/{uuid.uuid4()}/runs")
        assert r.status_code == 404


async def test_if_not_exists_create_and_reject(live: Live) -> None:
    client = get_client(url=live.url)
    tid = str(uuid.uuid4())
    with pytest.raises(httpx.HTTPStatusError) as info:  # wait's code path: plain httpx errors
        await client.runs.wait(tid, "echo", input={"text": "a"})
    assert info.value.response.status_code == 404
    out = await client.runs.wait(tid, "echo", input={"text": "a"}, if_not_exists="create")
    assert out == {"text": "a"}
    thread = await client.threads.get(tid)
    assert thread["metadata"]["graph_id"] == "echo"


async def test_list_get_delete_runs(live: Live) -> None:
    client = get_client(url=live.url)
    thread = await client.threads.create()
    tid = thread["thread_id"]
    ids = [
        (await client.runs.create(tid, "echo", input={"text": str(i)}, metadata={"i": i}))["run_id"]
        for i in range(3)
    ]
    await client.runs.join(tid, ids[-1])
    listed = await client.runs.list(tid)
    assert [r["run_id"] for r in listed] == ids[::-1]
    assert all(r["status"] == "success" for r in listed)
    assert (await client.runs.list(tid, limit=1, offset=1))[0]["run_id"] == ids[1]
    assert await client.runs.list(tid, status="pending") == []
    selected = await client.runs.list(tid, select=["run_id", "status"])
    assert set(selected[0]) == {"run_id", "status"}
    run = await client.runs.get(tid, ids[0])
    assert run["metadata"]["i"] == 0
    assert run["kwargs"]["config"]["configurable"]["run_id"] == ids[0]
    await client.runs.delete(tid, ids[0])
    with pytest.raises(NotFoundError):
        await client.runs.get(tid, ids[0])
    assert len(await client.runs.list(tid)) == 2


async def test_interrupt_after_all_nodes(live: Live) -> None:
    client = get_client(url=live.url)
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "steps", input={"tag": tag()}, interrupt_after="*")
    state = await client.threads.get_state(tid)
    assert state["next"] == ["b"] and state["values"]["trail"] == ["a"]
    await client.runs.wait(tid, "steps", input=None, interrupt_after=["b"])
    state = await client.threads.get_state(tid)
    assert state["next"] == ["c"] and state["values"]["trail"] == ["a", "b"]
    assert (await client.threads.get(tid))["status"] == "interrupted"
    out = await client.runs.wait(tid, "steps", input=None)
    assert out["trail"] == ["a", "b", "c"]
