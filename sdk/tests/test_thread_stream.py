"""`client.threads.stream(...)` (the thread-stream protocol) on the fake server, for both
ThreadStream and AsyncThreadStream: command envelopes and their errors, a subscription that
resumes with `since` after a cut and after a clean close with each event once, the resume gap,
and values / interrupts / respond."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fake_server import FakeServer, body_of, resolve, sse_response

from graphkeep_client import APIError, ResumeGap, ThreadStreamError

T = "1f0c2d3e-4a5b-7c6d-8e9f-0a1b2c3d4e5f"
COMMANDS = f"/threads/{T}/commands"
EVENTS = f"/threads/{T}/stream/events"


def ev(seq: int, method: str, data: Any, namespace: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "event",
        "event_id": str(seq),
        "seq": seq,
        "method": method,
        "params": {"namespace": namespace or [], "timestamp": 0, "data": data},
    }


def frames(*events: dict[str, Any]) -> bytes:
    out = b": heartbeat\r\n\r\n"
    for e in events:
        out += f"event: {e['method']}\r\ndata: {json.dumps(e)}\r\nid: {e['seq']}\r\n\r\n".encode()
    return out


async def take(events: Any, n: int) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    if hasattr(events, "__aiter__"):
        async for e in events:
            got.append(e)
            if len(got) == n:
                break
    else:
        for e in events:
            got.append(e)
            if len(got) == n:
                break
    return got


async def test_run_start_sends_the_envelope_and_returns_the_result(
    server: FakeServer, client: Any
) -> None:
    server.on(
        "POST",
        COMMANDS,
        httpx.Response(
            200,
            json={"type": "success", "id": 1, "result": {"run_id": "r1"}, "meta": {}},
        ),
    )
    thread = client.threads.stream(T, assistant_id="agent", headers={"x-extra": "1"})
    result = await resolve(thread.run.start(input={"q": 1}, config={"tags": ["t"]}))
    assert result == {"run_id": "r1"}
    sent = server.calls("POST", COMMANDS)[0]
    assert body_of(sent) == {
        "id": 1,
        "method": "run.start",
        "params": {"assistant_id": "agent", "input": {"q": 1}, "config": {"tags": ["t"]}},
    }
    assert sent.headers["x-extra"] == "1"


async def test_command_errors_are_typed(server: FakeServer, client: Any) -> None:
    server.on(
        "POST",
        COMMANDS,
        httpx.Response(
            200,
            json={"type": "error", "id": 1, "error": "unknown_error", "message": "409: busy"},
        ),
        httpx.Response(200, json={"no": "id"}),
        httpx.Response(422, json={"detail": "Invalid thread ID"}),
    )
    thread = client.threads.stream(T, assistant_id="agent")
    with pytest.raises(ThreadStreamError) as refused:
        await resolve(thread.run.start())
    assert refused.value.code == "unknown_error" and refused.value.message == "409: busy"
    with pytest.raises(ThreadStreamError) as invalid:
        await resolve(thread.run.start())
    assert invalid.value.code == "invalid_response"
    with pytest.raises(APIError) as http_error:
        await resolve(thread.run.start())
    assert http_error.value.status == 422


async def test_subscription_resumes_with_since_each_event_once_then_gap(
    server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    server.on(
        "POST",
        EVENTS,
        # a cut mid-stream, then a replay overlapping what was delivered, then a clean close
        sse_response([frames(ev(1, "values", {"n": 1}), ev(2, "values", {"n": 2}))], cut=True),
        sse_response([frames(ev(2, "values", {"n": 2}), ev(3, "values", {"n": 3}))]),
        httpx.Response(
            410,
            json={
                "detail": "gone",
                "type": "error",
                "id": None,
                "error": "resume_gap",
                "message": "events after seq 3 are no longer retained",
                "since": 3,
                "min_available_seq": 9,
            },
        ),
    )
    thread = client.threads.stream(T, assistant_id="agent")
    events = thread.subscribe(["values"])
    got = await take(events, 3)
    assert [e["seq"] for e in got] == [1, 2, 3]
    with pytest.raises(ResumeGap) as gap:
        await take(events, 1)
    assert (gap.value.since, gap.value.min_available_seq) == (3, 9)
    bodies = [body_of(r) for r in server.calls("POST", EVENTS)]
    assert bodies == [
        {"channels": ["values"]},
        {"channels": ["values"], "since": 2},
        {"channels": ["values"], "since": 3},
    ]
    assert len(sleeps) == 2  # one backoff per reconnect
    assert thread.cursor == 3


async def test_a_replay_of_delivered_events_only_is_not_progress(
    server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    from graphkeep_client import TransportError

    # every reconnect replays the one event already delivered, then the link breaks again:
    # the attempts run out instead of looping for ever
    cuts = [sse_response([frames(ev(1, "values", {}))], cut=True) for _ in range(7)]
    server.on("POST", EVENTS, *cuts)
    thread = client.threads.stream(T, assistant_id="agent")
    events = thread.subscribe(["values"])
    assert [e["seq"] for e in await take(events, 1)] == [1]
    with pytest.raises(TransportError, match="5 reconnect attempts"):
        await take(events, 1)
    assert len(server.calls("POST", EVENTS)) == 6 and len(sleeps) == 5


async def test_closing_a_subscription_closes_its_connection_at_once(
    server: FakeServer, client: Any
) -> None:
    reply = sse_response([frames(ev(1, "values", {}), ev(2, "values", {}))])
    body = reply.stream  # the CutStream itself: httpx wraps it once it is sent
    server.on("POST", EVENTS, reply)
    thread = client.threads.stream(T, assistant_id="agent")
    events = thread.subscribe(["values"])
    assert [e["seq"] for e in await take(events, 1)] == [1]
    assert not body.closed  # type: ignore[attr-defined]
    await resolve(events.aclose() if hasattr(events, "__aiter__") else events.close())
    # not left to the garbage collector: the response is closed when the subscription is
    assert body.closed  # type: ignore[attr-defined]


async def test_reconnects_are_bounded(server: FakeServer, client: Any, sleeps: list[float]) -> None:
    from graphkeep_client import TransportError

    server.on("POST", EVENTS, httpx.ConnectError("refused"))
    thread = client.threads.stream(T, assistant_id="agent")
    with pytest.raises(TransportError):
        await take(thread.events, 1)
    assert len(sleeps) == 5  # the client's stream_reconnects


async def test_values_interrupt_and_respond(server: FakeServer, client: Any) -> None:
    server.on("GET", f"/threads/{T}/state", httpx.Response(200, json={"values": {"n": 0}}))
    server.on(
        "POST",
        EVENTS,
        sse_response(
            [
                frames(
                    ev(1, "lifecycle", {"event": "running", "graph_name": "g"}),
                    ev(2, "values", {"n": 1}),
                    ev(3, "input.requested", {"interrupt_id": "i1", "payload": "ok?"}, ["a:1"]),
                    ev(4, "values", {"never": True}),
                )
            ]
        ),
    )
    server.on(
        "POST",
        COMMANDS,
        httpx.Response(200, json={"type": "success", "id": 1, "result": {}, "meta": {}}),
    )
    server.on("GET", f"/threads/{T}/runs", httpx.Response(200, json=[]))
    thread = client.threads.stream(T, assistant_id="agent")
    snaps = await take(thread.values, 10)
    assert snaps == [{"n": 0}, {"n": 1}]
    assert thread.interrupted
    assert thread.interrupts == [{"interrupt_id": "i1", "namespace": ["a:1"], "payload": "ok?"}]
    await resolve(thread.run.respond("yes"))
    assert body_of(server.calls("POST", COMMANDS)[0])["params"] == {
        "interrupt_id": "i1",
        "namespace": ["a:1"],
        "response": "yes",
    }
    assert not thread.interrupted
    with pytest.raises(ThreadStreamError):
        await resolve(thread.run.respond("again"))  # nothing outstanding
