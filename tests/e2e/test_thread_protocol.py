"""The thread-stream protocol (`client.threads.stream`, docs thread-stream-protocol.md) against
a live `graphkeep serve` (JWT auth, so tenants are real) on SQLite and PostgreSQL: the official
SDK's values / interrupt / respond / output, token events, classic runs' root lifecycle on the
same log, `since` replay identical across connections and after a server restart, tenant
isolation, and clean protocol errors for bad input.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.authkit import AUDIENCE, HS_SECRET, ISSUER, bearer, claims, hs_token
from tests.conftest import drop_pg_database
from tests.e2e.runs_fixtures import fresh_database
from tests.e2e.runs_server import serve

pytestmark = pytest.mark.e2e

AUTH_ENV = {
    "GRAPHKEEP_AUTH": "jwt",
    "GRAPHKEEP_JWT_SECRET": HS_SECRET,
    "GRAPHKEEP_JWT_ISSUER": ISSUER,
    "GRAPHKEEP_JWT_AUDIENCE": AUDIENCE,
}
ALL = ["values", "updates", "messages", "tools", "custom", "lifecycle", "input"]


@dataclass
class Live:
    url: str
    db_url: str
    tmp: Any
    stack: ExitStack

    def headers(self, tenant: str = "tp-a") -> dict[str, str]:
        return bearer(hs_token(claims(tenant=tenant, sub=f"{tenant}-user", ttl=3600)))

    def client(self, tenant: str = "tp-a") -> LangGraphClient:
        return get_client(url=self.url, api_key=None, headers=self.headers(tenant))


@pytest.fixture(
    scope="module",
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    dialect = str(request.param)
    tmp = tmp_path_factory.mktemp(f"thread_protocol_{dialect}")
    db_url = fresh_database(dialect, tmp)
    try:
        with ExitStack() as stack:
            proc = stack.enter_context(serve(db_url, tmp, workers=2, env=AUTH_ENV))
            assert proc.url is not None
            yield Live(proc.url, db_url, tmp, stack)
    finally:
        if dialect == "postgres":
            drop_pg_database(db_url)


async def _events(
    url: str,
    headers: dict[str, str],
    thread_id: str,
    body: dict[str, Any],
    *,
    until: Any,
    timeout: float = 15,
) -> list[dict[str, Any]]:
    """Events of one SSE connection until `until(events)` holds (or timeout: what came)."""
    got: list[dict[str, Any]] = []

    async def read() -> None:
        async with (
            httpx.AsyncClient(timeout=30) as http,
            http.stream(
                "POST", f"{url}/threads/{thread_id}/stream/events", json=body, headers=headers
            ) as response,
        ):
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    got.append(json.loads(line[6:]))
                    if until(got):
                        return

    try:
        await asyncio.wait_for(read(), timeout)
    except TimeoutError:
        pass
    return got


def _root(events: list[dict[str, Any]], name: str) -> bool:
    return any(
        e["method"] == "lifecycle"
        and not e["params"]["namespace"]
        and e["params"]["data"]["event"] == name
        for e in events
    )


async def _command(live: Live, thread_id: str, body: Any, tenant: str = "tp-a") -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(
            f"{live.url}/threads/{thread_id}/commands", json=body, headers=live.headers(tenant)
        )


async def test_sdk_values_interrupt_respond_output(live: Live) -> None:
    client = live.client()
    async with client.threads.stream(assistant_id="asker") as thread:
        started = await thread.run.start(input={"question": "ship it?"})
        assert uuid.UUID(started["run_id"])
        snaps = [snap async for snap in thread.values]
        if {"question": "ship it?"} not in snaps:
            # the SDK subscribes to values only after run.start answered (the client-side race
            # the upstream runner documents): the durable log must still hold the snapshot
            def asked(events: list[dict[str, Any]]) -> bool:
                return any(
                    e["method"] == "values" and e["params"]["data"] == {"question": "ship it?"}
                    for e in events
                )

            logged = await _events(
                live.url,
                live.headers(),
                thread.thread_id,
                {"channels": ["values"], "since": 0},
                until=asked,
            )
            assert asked(logged), (snaps, logged)
        assert thread.interrupted
        [pending] = thread.interrupts
        assert pending["value"] == {"question": "ship it?"}
        # `input.requested` is sent once the run's checkpoint and the interrupt's writes are
        # stored (durability "async" puts them in flight): a client acting on it sees them
        state = await client.threads.get_state(thread.thread_id)
        assert state["values"] == {"question": "ship it?"}
        pending_ids = [i["id"] for task in state["tasks"] for i in task["interrupts"]]
        assert pending_ids == [pending["interrupt_id"]], state
        await thread.run.respond("yes")
        out = await asyncio.wait_for(thread.output, 15)
    assert out == {"question": "ship it?", "answer": "yes!"}
    # both runs are ordinary runs of the thread
    runs = await client.runs.list(thread.thread_id)
    assert sorted(r["status"] for r in runs) == ["success", "success"]


async def test_log_replays_identically_with_since(live: Live) -> None:
    client = live.client()
    async with client.threads.stream(assistant_id="chat") as thread:
        await thread.run.start(input={"messages": [{"role": "user", "content": "hi there"}]})
        out = await asyncio.wait_for(thread.output, 15)
        tid = thread.thread_id
    assert "echo hi there" in json.dumps(out["messages"][-1]["content"])
    h = live.headers()
    first = await _events(
        live.url, h, tid, {"channels": ALL}, until=lambda e: _root(e, "completed")
    )
    again = await _events(
        live.url, h, tid, {"channels": ALL}, until=lambda e: _root(e, "completed")
    )
    assert first == again
    seqs = [e["seq"] for e in first]
    assert seqs == sorted(set(seqs)) and len({e["event_id"] for e in first}) == len(first)
    assert first[0]["params"]["data"] == {"event": "running", "graph_name": "chat"}
    deltas = [
        e["params"]["data"]["delta"]["text"]
        for e in first
        if e["method"] == "messages" and e["params"]["data"]["event"] == "content-block-delta"
    ]
    assert "".join(deltas) == "echo hi there"
    # resuming from a cursor gives exactly the rest
    cut = seqs[3]
    rest = await _events(
        live.url, h, tid, {"channels": ALL, "since": cut}, until=lambda e: _root(e, "completed")
    )
    assert rest == [e for e in first if e["seq"] > cut]
    # a channel filter keeps seq and event_id
    lifecycle = await _events(
        live.url, h, tid, {"channels": ["lifecycle"]}, until=lambda e: _root(e, "completed")
    )
    assert lifecycle == [e for e in first if e["method"] == "lifecycle"]


async def test_classic_run_appears_with_root_lifecycle(live: Live) -> None:
    client = live.client()
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "echo", input={"text": "classic"})
    got = await _events(
        live.url, live.headers(), tid, {"channels": ["lifecycle"]}, until=lambda e: len(e) >= 2
    )
    assert [e["params"]["data"]["event"] for e in got] == ["running", "completed"]


async def test_failed_run_ends_with_failed_lifecycle(live: Live) -> None:
    tid = str(uuid.uuid4())
    r = await _command(
        live,
        tid,
        {"id": 1, "method": "run.start", "params": {"assistant_id": "failing", "input": {}}},
    )
    assert r.status_code == 200 and r.json()["type"] == "success", r.text
    got = await _events(
        live.url,
        live.headers(),
        tid,
        {"channels": ["lifecycle"]},
        until=lambda e: _root(e, "failed"),
    )
    assert got[-1]["params"]["data"]["event"] == "failed"
    assert got[-1]["params"]["data"]["error"]


async def test_other_tenant_sees_nothing(live: Live) -> None:
    tid = str(uuid.uuid4())
    r = await _command(
        live,
        tid,
        {
            "id": 1,
            "method": "run.start",
            "params": {"assistant_id": "echo", "input": {"text": "x"}},
        },
    )
    assert r.json()["type"] == "success"
    mine = await _events(
        live.url,
        live.headers(),
        tid,
        {"channels": ["lifecycle"]},
        until=lambda e: _root(e, "completed"),
    )
    assert _root(mine, "completed")
    theirs = await _events(
        live.url, live.headers("tp-b"), tid, {"channels": ALL}, until=lambda e: bool(e), timeout=2
    )
    assert theirs == []
    answer = (
        await _command(
            live,
            tid,
            {"id": 7, "method": "input.respond", "params": {"interrupt_id": "x", "response": 1}},
            tenant="tp-b",
        )
    ).json()
    assert answer["id"] == 7 and answer["type"] == "error" and answer["error"] == "no_such_run"
    start = (
        await _command(
            live,
            tid,
            {"id": 8, "method": "run.start", "params": {"assistant_id": "echo"}},
            tenant="tp-b",
        )
    ).json()
    assert start["type"] == "error" and start["error"] == "unknown_error"


async def test_bad_input_is_a_clean_protocol_error(live: Live) -> None:
    tid = str(uuid.uuid4())
    h = live.headers()
    async with httpx.AsyncClient(base_url=live.url, headers=h, timeout=10) as http:
        r = await http.post(f"/threads/{tid}/commands", content=b"{nope")
        assert r.status_code == 400 and r.json() == {"detail": "Invalid JSON body"}
        r = await http.post(f"/threads/{tid}/commands", json={"id": "1", "method": "run.start"})
        assert r.status_code == 400 and r.json()["error"] == "invalid_argument"
        r = await http.post(f"/threads/{tid}/commands", json={"id": 1, "method": 5})
        assert r.status_code == 400 and r.json()["id"] == 1
        r = await http.post(f"/threads/{tid}/commands", json={"id": 2, "method": "state.get"})
        assert r.status_code == 200 and r.json()["error"] == "unknown_command"
        r = await http.post(
            f"/threads/{tid}/commands", json={"id": 3, "method": "run.start", "params": {}}
        )
        assert r.json()["error"] == "invalid_argument"
        r = await http.post(f"/threads/{tid}/commands", json={"id": 4, "method": "agent.getTree"})
        assert r.json()["error"] == "no_such_run"
        r = await http.post("/threads/not-a-uuid/commands", json={"id": 5, "method": "run.start"})
        assert r.status_code == 422
        r = await http.post(f"/threads/{tid}/stream/events", json={"channels": ["debug"]})
        assert r.status_code == 400 and "detail" in r.json()
        r = await http.post(f"/threads/{tid}/stream/events", json={"channels": []})
        assert r.status_code == 400
        r = await http.post(f"/threads/{tid}/stream/events", content=b"[")
        assert r.status_code == 400
        r = await http.post("/threads/nope/stream/events", json={"channels": ["values"]})
        assert r.status_code == 422
        r = await http.post(
            f"/threads/{tid}/commands",
            content=b'{"id":1,"method":"run.start","params":{"x":"' + b"a" * (2 << 20) + b'"}}',
        )
        assert r.status_code in (400, 413)
        deep = b'{"id": 6, "method": "run.start", "params": ' + b"[" * 5000 + b"]" * 5000 + b"}"
        r = await http.post(f"/threads/{tid}/commands", content=deep)  # a 500 before
        assert r.status_code == 422
        assert r.json() == {"detail": "body: nested deeper than 100 levels"}
        # these routes read their body as JSON whatever its content type, so they check it
        # as HTTP's boundary check does a JSON one (a NUL input was a 500 with text/plain)
        plain = {"content-type": "text/plain"}
        nul = b'{"id": 7, "method": "run.start", "params": {"assistant_id": "echo", '
        nul += b'"input": {"text": "a\\u0000"}}}'
        r = await http.post(f"/threads/{tid}/commands", content=nul, headers=plain)
        assert r.status_code == 422, r.text
        assert r.json() == {"detail": "body.params.input.text: text contains a NUL character"}
        bad = b'{"channels": ["values"], "since": 1' + b"0" * 30 + b"}"
        r = await http.post(f"/threads/{tid}/stream/events", content=bad, headers=plain)
        assert r.status_code == 422 and "64-bit" in r.json()["detail"]
        r = await http.post(f"/threads/{tid}/commands", content=b'{"id": "\xff"}', headers=plain)
        assert r.status_code == 400 and "UTF-8" in r.json()["detail"]
        assert (await http.get(f"/threads/{tid}")).status_code == 404  # nothing was written


async def test_replay_from_another_server_process(live: Live) -> None:
    """The log is in the database: a second process (a restart, another replica) replays the
    same events with the same seq and event_id, and live events it did not produce."""
    tid = str(uuid.uuid4())
    start = {
        "id": 1,
        "method": "run.start",
        "params": {"assistant_id": "echo", "input": {"text": "a"}},
    }
    assert (await _command(live, tid, start)).json()["type"] == "success"
    h = live.headers()
    here = await _events(live.url, h, tid, {"channels": ALL}, until=lambda e: _root(e, "completed"))
    with serve(live.db_url, live.tmp, workers=0, env=AUTH_ENV, name="replica") as other:
        assert other.url is not None
        there = await _events(
            other.url, h, tid, {"channels": ALL}, until=lambda e: _root(e, "completed")
        )
        assert there == here
        # a run executed by the first process reaches a stream held on the second
        waiting = asyncio.create_task(
            _events(
                other.url,
                h,
                tid,
                {"channels": ["lifecycle"], "since": here[-1]["seq"]},
                until=lambda e: _root(e, "completed"),
            )
        )
        await asyncio.sleep(0.5)
        assert (await _command(live, tid, {**start, "id": 2})).json()["type"] == "success"
        later = await waiting
    assert [e["params"]["data"]["event"] for e in later] == ["running", "completed"]
    assert later[0]["seq"] > here[-1]["seq"]


async def test_websocket_transport(live: Live) -> None:
    """The SDK over WebSocket (its upgrade carries only the `headers=` passed to stream())."""
    client = live.client()
    async with client.threads.stream(
        assistant_id="asker", transport="websocket", headers=live.headers()
    ) as thread:
        await thread.run.start(input={"question": "ws?"})
        snaps = [snap async for snap in thread.values]
        assert {"question": "ws?"} in snaps and thread.interrupted
        await thread.run.respond("sure")
        out = await asyncio.wait_for(thread.output, 15)
    assert out == {"question": "ws?", "answer": "sure!"}


async def test_websocket_bad_frames_and_gap(live: Live) -> None:
    import websockets

    tid = str(uuid.uuid4())
    url = live.url.replace("http://", "ws://") + f"/threads/{tid}/stream/events"
    async with websockets.connect(url, additional_headers=live.headers()) as ws:
        await ws.send("{not json")
        bad = json.loads(await ws.recv())
        assert bad["type"] == "error" and bad["id"] is None and bad["error"] == "invalid_argument"
        await ws.send(
            json.dumps(
                {"id": 1, "method": "subscription.subscribe", "params": {"channels": ["debug"]}}
            )
        )
        assert json.loads(await ws.recv())["error"] == "invalid_argument"
        await ws.send(
            json.dumps(
                {"id": 2, "method": "subscription.unsubscribe", "params": {"subscription_id": "x"}}
            )
        )
        assert json.loads(await ws.recv())["error"] == "no_such_subscription"
        await ws.send(
            json.dumps(
                {"id": 3, "method": "subscription.subscribe", "params": {"channels": ["lifecycle"]}}
            )
        )
        ok = json.loads(await ws.recv())
        assert ok["type"] == "success" and ok["id"] == 3 and ok["result"]["subscription_id"]
        start = {
            "id": 4,
            "method": "run.start",
            "params": {"assistant_id": "echo", "input": {"text": "w"}},
        }
        await ws.send(json.dumps(start))
        frames = [json.loads(await asyncio.wait_for(ws.recv(), 15)) for _ in range(3)]
        assert [f.get("type") for f in frames].count("success") == 1
        events = [f["params"]["data"]["event"] for f in frames if f.get("type") == "event"]
        assert events == ["running", "completed"]
    async with websockets.connect(
        url.replace(tid, "not-a-uuid"), additional_headers=live.headers()
    ) as ws:
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4422


async def test_websocket_refuses_unstorable_frames_and_stays_open(live: Live) -> None:
    """A frame holds what HTTP's boundary check refuses (a NUL, a lone surrogate, an integer
    outside 64 bits, NaN, nesting too deep even for the parser): an `invalid_argument` error
    naming where, nothing written, and the socket still serves the next command. Before, a
    NUL in a run's input reached the database write and the socket died without a close."""
    import websockets

    tid = str(uuid.uuid4())
    url = live.url.replace("http://", "ws://") + f"/threads/{tid}/stream/events"
    start = '{"id": ID, "method": "run.start", "params": {"assistant_id": "echo", "input": IN}}'
    frames = {
        '{"text": "a\\u0000"}': "frame.params.input.text: text contains a NUL character",
        '{"text": "\\ud800"}': "frame.params.input.text: text contains a lone surrogate",
        '{"text": "a", "n": 99999999999999999999}': "frame.params.input.n: integer outside",
        '{"text": "a", "n": NaN}': "frame.params.input.n: number is not finite",
        '{"text": ' + "[" * 5000 + "]" * 5000 + "}": "frame: nested deeper than 100 levels",
    }
    async with websockets.connect(url, additional_headers=live.headers()) as ws:
        for number, (value, problem) in enumerate(frames.items(), start=1):
            await ws.send(start.replace("ID", str(number)).replace("IN", value))
            answer = json.loads(await asyncio.wait_for(ws.recv(), 15))
            assert answer["type"] == "error" and answer["error"] == "invalid_argument", answer
            assert answer["message"].startswith(problem), answer
            # the id is echoed unless the parser never got to it (too deep)
            assert answer["id"] == (None if "deep" in problem else number)
        await ws.send('{"id": 99999999999999999999, "method": "run.start", "params": {}}')
        answer = json.loads(await asyncio.wait_for(ws.recv(), 15))
        assert answer["id"] is None and answer["message"].startswith("frame.id: integer")
        channels = {"channels": ["values"]}
        await ws.send(json.dumps({"id": 7, "method": "subscription.subscribe", "params": channels}))
        ok = json.loads(await asyncio.wait_for(ws.recv(), 15))
        assert ok["type"] == "success" and ok["id"] == 7
    async with httpx.AsyncClient(base_url=live.url, headers=live.headers(), timeout=10) as http:
        assert (await http.get(f"/threads/{tid}")).status_code == 404  # nothing was written


async def test_websocket_subscription_added_mid_run_gets_what_went_by(live: Live) -> None:
    """The SDK subscribes its content stream on a socket whose lifecycle watcher is already
    following the thread, with `since` at the last event it saw. Events that went by in
    between, matching no subscription then, are sent to the new one first (in seq order,
    once), then live ones. Before, they were lost: the JS useStream check's stop scenario
    missed the run's first values under load (tests/e2e/test_js_use_stream.py)."""
    import websockets

    tid = str(uuid.uuid4())
    url = live.url.replace("http://", "ws://") + f"/threads/{tid}/stream/events"

    async def frame(ws: Any) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), 15))
        return out

    def subscribe(command_id: int, channels: list[str], since: int | None = None) -> str:
        params: dict[str, Any] = {"channels": channels}
        if since is not None:
            params["since"] = since
        return json.dumps({"id": command_id, "method": "subscription.subscribe", "params": params})

    async with websockets.connect(url, additional_headers=live.headers()) as ws:
        await ws.send(subscribe(1, ["lifecycle"]))
        assert (await frame(ws))["type"] == "success"
        start = {"assistant_id": "steps", "input": {"tag": "mid", "sleep": 2}}
        await ws.send(json.dumps({"id": 2, "method": "run.start", "params": start}))
        got = [await frame(ws) for _ in range(2)]
        running = next(f for f in got if f.get("method") == "lifecycle")
        assert running["params"]["data"]["event"] == "running"
        await asyncio.sleep(1)  # node a's values go by while b sleeps: nobody wants them
        await ws.send(subscribe(3, ["values"], since=running["seq"]))
        caught = [await frame(ws) for _ in range(3)]
        answer = caught[-1]
        assert answer["type"] == "success" and answer["id"] == 3, caught
        assert answer["result"]["replayed_events"] == 2
        values = [f["params"]["data"]["trail"] for f in caught[:-1]]
        assert values == [[], ["a"]]
        seqs = [running["seq"], *[f["seq"] for f in caught[:-1]]]
        assert seqs == sorted(seqs) and len(set(seqs)) == 3
        later = [await frame(ws) for _ in range(3)]  # b's and c's values, then completed
        assert [f["method"] for f in later] == ["values", "values", "lifecycle"], later
        assert later[1]["params"]["data"]["trail"] == ["a", "b", "c"]
        assert all(f["seq"] > seqs[-1] for f in later)


async def test_trimmed_log_gives_a_clear_gap(live: Live) -> None:
    """After `POST /threads/prune` keep_latest, a cursor into the removed runs is refused
    (SSE 410, WebSocket `resume_gap`); `since` 0 and a cursor past the trim still replay."""
    import websockets

    tid = str(uuid.uuid4())
    h = live.headers()
    for n in (1, 2):
        start = {"id": n, "method": "run.start", "params": {"assistant_id": "echo", "input": {}}}
        assert (await _command(live, tid, start)).json()["type"] == "success"
        done = await _events(
            live.url,
            h,
            tid,
            {"channels": ["lifecycle"]},
            until=lambda e, n=n: (
                sum(
                    x["params"]["data"]["event"] == "completed"
                    for x in e
                    if not x["params"]["namespace"]
                )
                == n
            ),
        )
    second_running = [e["seq"] for e in done if e["params"]["data"]["event"] == "running"][-1]
    async with httpx.AsyncClient(base_url=live.url, headers=h, timeout=30) as http:
        r = await http.post("/threads/prune", json={"thread_ids": [tid], "strategy": "keep_latest"})
        assert r.status_code == 200
        r = await http.post(f"/threads/{tid}/stream/events", json={"channels": ALL, "since": 1})
        assert r.status_code == 410
        body = r.json()
        assert body["error"] == "resume_gap" and body["since"] == 1
        assert body["min_available_seq"] == second_running
    kept = await _events(
        live.url,
        h,
        tid,
        {"channels": ["lifecycle"], "since": 0},
        until=lambda e: _root(e, "completed"),
    )
    assert [e["seq"] for e in kept] == [e["seq"] for e in done if e["seq"] >= second_running]
    url = live.url.replace("http://", "ws://") + f"/threads/{tid}/stream/events"
    async with websockets.connect(url, additional_headers=h) as ws:
        reconnect = {"channels": ["lifecycle"], "since": 1}
        await ws.send(
            json.dumps({"id": 1, "method": "subscription.reconnect", "params": reconnect})
        )
        gap = json.loads(await asyncio.wait_for(ws.recv(), 15))
        assert gap["type"] == "error" and gap["id"] == 1 and gap["error"] == "resume_gap"
        assert gap["min_available_seq"] == second_running
        ok = {"channels": ["lifecycle"], "since": second_running - 1}
        await ws.send(json.dumps({"id": 2, "method": "subscription.reconnect", "params": ok}))
        frames = [json.loads(await asyncio.wait_for(ws.recv(), 15)) for _ in range(3)]
        # the follower may send before the response: order between them is not promised
        assert [f["id"] for f in frames if f["type"] == "success"] == [2]
        assert [f["seq"] for f in frames if f["type"] == "event"] == [e["seq"] for e in kept]


async def test_cancel_of_a_pending_run_ends_its_stream(live: Live) -> None:
    """A run.start queued behind a busy thread and cancelled before any worker took it still
    ends with its root terminal: the SDK's iterators wait for one (upstream test_cancel)."""
    client = live.client()
    tid = (await client.threads.create())["thread_id"]
    busy = await client.runs.create(tid, "steps", input={"tag": uuid.uuid4().hex, "sleep": 6})
    deadline = asyncio.get_running_loop().time() + 15
    while (await client.runs.get(tid, busy["run_id"]))["status"] != "running":
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.05)
    r = await _command(
        live,
        tid,
        {
            "id": 1,
            "method": "run.start",
            "params": {"assistant_id": "echo", "input": {"text": "q"}},
        },
    )
    assert r.status_code == 200 and r.json()["type"] == "success", r.text
    queued = r.json()["result"]["run_id"]
    assert (await client.runs.get(tid, queued))["status"] == "pending", [
        (x["run_id"], x["status"], x["multitask_strategy"]) for x in await client.runs.list(tid)
    ]
    reader = asyncio.create_task(
        _events(
            live.url,
            live.headers(),
            tid,
            {"channels": ["lifecycle"]},
            until=lambda e: _root(e, "failed"),
        )
    )
    await asyncio.sleep(0.2)
    await client.runs.cancel(tid, queued)
    got = await reader
    failed = [e for e in got if _root([e], "failed")]
    assert failed and failed[0]["params"]["data"]["error"] == "cancelled", got
    assert (await client.runs.get(tid, queued))["status"] == "interrupted"
    await client.runs.join(tid, busy["run_id"])
    assert (await client.runs.get(tid, busy["run_id"]))["status"] == "success"
