"""Run streams: typed events, reconnect after a cut with Last-Event-ID, exactly-once delivery,
and when to stop; for both RunStream and AsyncRunStream."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fake_server import FakeServer, collect, resolve, sse, sse_response

from graphkeep_client import (
    Interrupt,
    NotFound,
    ProtocolError,
    RunMetadata,
    ServerError,
    StreamError,
    StreamEvent,
    TransportError,
)
from graphkeep_client._resume import Resume

T = "1f0c2d3e-4a5b-7c6d-8e9f-0a1b2c3d4e5f"
R = "1f0c2d3e-aaaa-7c6d-8e9f-0a1b2c3d4e5f"
CREATE = f"/threads/{T}/runs/stream"
JOIN = f"/threads/{T}/runs/{R}/stream"
RUN = f"/threads/{T}/runs/{R}"
HEADERS = {"location": JOIN, "content-location": RUN}

META = ("metadata", {"run_id": R, "attempt": 1}, "1")
V1 = ("values", {"n": 1}, "2")
V2 = ("values", {"n": 2}, "3")
V3 = ("values", {"n": 3}, "4")
END = ("end", None, "5")


def names(events: list[StreamEvent]) -> list[tuple[str, Any]]:
    return [(e.event, e.data) for e in events]


async def test_stream_cut_mid_event_resumes_with_last_event_id_exactly_once(
    server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    first = sse(META, V1) + sse(V2)[:12]  # cut in the middle of event 3
    server.on("POST", CREATE, sse_response([first[:20], first[20:]], cut=True, headers=HEADERS))
    # The join stream replays from the id it was given, and (like a careless proxy may)
    # repeats an event the client already has: the client must drop it.
    server.on("GET", JOIN, sse_response([sse(V1, V2, V3, END)], headers={"location": JOIN}))

    stream = client.runs.stream(T, "agent", input={}, stream_resumable=True)
    events = await collect(stream)

    assert names(events) == [
        ("metadata", {"run_id": R, "attempt": 1}),
        ("values", {"n": 1}),
        ("values", {"n": 2}),
        ("values", {"n": 3}),
        ("end", None),
    ]
    assert [e.id for e in events] == ["1", "2", "3", "4", "5"]
    rejoin = server.calls("GET", JOIN)
    assert len(rejoin) == 1
    assert rejoin[0].headers["last-event-id"] == "2"
    assert rejoin[0].headers["accept"] == "text/event-stream"
    assert "content-type" not in rejoin[0].headers
    assert stream.run_id == R and stream.thread_id == T and stream.last_event_id == "5"
    assert stream.reconnects == 1 and len(sleeps) == 1


async def test_repeated_cuts_keep_resuming_while_progress_is_made(
    server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    server.on("POST", CREATE, sse_response([sse(META)], cut=True, headers=HEADERS))
    server.on(
        "GET",
        JOIN,
        sse_response([sse(V1)], cut=True),
        sse_response([sse(V1, V2)], cut=True),
        sse_response([sse(V3, END)]),
    )
    events = await collect(client.runs.stream(T, "agent", stream_resumable=True))
    assert [e.id for e in events] == ["1", "2", "3", "4", "5"]
    assert [r.headers["last-event-id"] for r in server.calls("GET", JOIN)] == ["1", "2", "3"]


async def test_location_missing_rejoins_the_run_join_stream_url(
    server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    server.on("POST", CREATE, sse_response([sse(META, V1)], cut=True))  # no headers at all
    server.on("GET", JOIN, sse_response([sse(V2, END)]))
    events = await collect(client.runs.stream(T, "agent", stream_resumable=True))
    assert [e.id for e in events] == ["1", "2", "3", "5"]
    assert server.calls("GET", JOIN)[0].headers["last-event-id"] == "2"


async def test_clean_close_without_end_checks_the_run_and_rejoins_if_running(
    server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    server.on("POST", CREATE, sse_response([sse(META, V1)], headers=HEADERS))
    server.on(
        "GET",
        RUN,
        httpx.Response(200, json={"run_id": R, "status": "running"}),
        httpx.Response(200, json={"run_id": R, "status": "success"}),
    )
    server.on("GET", JOIN, sse_response([sse(V2)]))
    events = await collect(client.runs.stream(T, "agent", stream_resumable=True))
    assert [e.id for e in events] == ["1", "2", "3"]
    assert len(server.calls("GET", RUN)) == 2  # running -> rejoin; success -> done
    assert server.calls("GET", RUN)[0].headers["accept"] == "application/json"


async def test_clean_close_of_a_finished_run_ends_the_stream(
    server: FakeServer, client: Any
) -> None:
    server.on("POST", CREATE, sse_response([sse(META, V1)], headers=HEADERS))
    server.on("GET", RUN, httpx.Response(200, json={"run_id": R, "status": "success"}))
    events = await collect(client.runs.stream(T, "agent"))
    assert len(events) == 2
    assert server.calls("GET", JOIN) == []


async def test_error_event_is_terminal_and_typed(server: FakeServer, client: Any) -> None:
    err = ("error", {"error": "ValueError", "message": "bad input"})
    # Anything after a terminal event is never read, and no run check is made.
    server.on("POST", CREATE, sse_response([sse(META, err, V1)], headers=HEADERS))
    events = await collect(client.runs.stream(T, "agent"))
    assert [e.event for e in events] == ["metadata", "error"]
    assert events[-1].error == StreamError(error="ValueError", message="bad input")
    assert events[-1].is_terminal
    assert server.calls("GET", RUN) == []


async def test_reconnect_retries_through_a_restart(
    server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    server.on("POST", CREATE, sse_response([sse(META)], cut=True, headers=HEADERS))
    server.on(
        "GET",
        JOIN,
        httpx.ConnectError("refused"),
        httpx.Response(503, json={"detail": "starting"}),
        httpx.Response(200, text="<html>proxy</html>", headers={"content-type": "text/html"}),
        sse_response([sse(V1, END)]),
    )
    events = await collect(client.runs.stream(T, "agent", stream_resumable=True))
    assert [e.id for e in events] == ["1", "2", "5"]
    assert len(sleeps) == 4
    assert sleeps == sorted(sleeps)  # backoff grows while no progress is made


async def test_gives_up_after_the_reconnect_limit(
    server: FakeServer, make_client: Any, sleeps: list[float]
) -> None:
    client = make_client(stream_reconnects=2)
    server.on("POST", CREATE, sse_response([sse(META)], cut=True, headers=HEADERS))
    server.on("GET", JOIN, httpx.ConnectError("refused"))
    with pytest.raises(TransportError, match="2 reconnect attempts"):
        await collect(client.runs.stream(T, "agent"))
    assert len(server.calls("GET", JOIN)) == 2


async def test_a_gone_run_on_reconnect_raises_not_found(
    server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    server.on("POST", CREATE, sse_response([sse(META)], cut=True, headers=HEADERS))
    server.on("GET", JOIN, httpx.Response(404, json={"detail": "Run not found"}))
    with pytest.raises(NotFound, match="Run not found"):
        await collect(client.runs.stream(T, "agent"))


async def test_errors_before_the_stream_starts_are_raised(server: FakeServer, client: Any) -> None:
    server.on("POST", CREATE, httpx.Response(404, json={"detail": "Thread not found"}))
    with pytest.raises(NotFound, match="Thread not found"):
        await collect(client.runs.stream(T, "agent"))
    assert len(server.requests) == 1  # creating a run is never repeated


async def test_a_dropped_create_is_not_repeated(server: FakeServer, client: Any) -> None:
    server.on("POST", CREATE, httpx.ReadError("reset"))
    with pytest.raises(TransportError):
        await collect(client.runs.stream(T, "agent"))
    assert len(server.requests) == 1


async def test_non_sse_answer_is_a_protocol_error(server: FakeServer, client: Any) -> None:
    server.on("POST", CREATE, httpx.Response(200, json={"not": "sse"}))
    with pytest.raises(ProtocolError, match="text/event-stream"):
        await collect(client.runs.stream(T, "agent"))


async def test_cross_origin_location_is_refused(server: FakeServer, client: Any) -> None:
    headers = {"location": f"http://evil.test{JOIN}"}
    server.on("POST", CREATE, sse_response([sse(META)], headers=headers))
    with pytest.raises(ProtocolError, match="another origin"):
        await collect(client.runs.stream(T, "agent"))


async def test_join_stream_sends_last_event_id_and_modes(server: FakeServer, client: Any) -> None:
    server.on("GET", JOIN, sse_response([sse(V2, V3, END)], headers={"location": JOIN}))
    stream = client.runs.join_stream(T, R, last_event_id="2", stream_mode=["values", "custom"])
    events = await collect(stream)
    assert [e.id for e in events] == ["3", "4", "5"]
    sent = server.requests[0]
    assert sent.headers["last-event-id"] == "2"
    assert sent.url.params.get_list("stream_mode") == ["values", "custom"]
    assert sent.url.params["cancel_on_disconnect"] == "false"


async def test_join_stream_retries_its_first_request(
    server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    server.on(
        "GET",
        JOIN,
        httpx.Response(429, json={"detail": "slow down"}, headers={"retry-after": "3"}),
        sse_response([sse(V1, END)]),
    )
    events = await collect(client.runs.join_stream(T, R))
    assert [e.event for e in events] == ["values", "end"]
    assert sleeps == [3.0]


async def test_stateless_stream_without_reconnect_target_raises_on_cut(
    server: FakeServer, client: Any
) -> None:
    server.on("POST", "/runs/stream", sse_response([sse(("metadata", {"run_id": R}))], cut=True))
    with pytest.raises(TransportError, match="no reconnect target"):
        await collect(client.runs.stream(None, "agent"))


async def test_closing_early_stops_reading(server: FakeServer, client: Any) -> None:
    reply = sse_response([sse(META, V1, V2, END)], headers=HEADERS)
    body = reply.stream  # the CutStream itself: httpx wraps it once it is sent
    server.on("POST", CREATE, reply)
    stream = client.runs.stream(T, "agent")
    if hasattr(stream, "__aiter__"):
        first = await stream.__anext__()
        await stream.aclose()
    else:
        first = next(stream)
        stream.close()
    assert first.run_metadata == RunMetadata(run_id=R, attempt=1)
    assert body.closed  # type: ignore[attr-defined]
    assert await resolve(collect(stream)) == []


def test_delivered_ids_are_remembered_up_to_a_bound() -> None:
    resume = Resume(max_reconnects=1, backoff=0.0, max_backoff=0.0)
    assert resume.first_time("a") and not resume.first_time("a")
    assert resume.first_time(None) and resume.first_time(None)  # no id: always new
    for n in range(10_000):
        resume.first_time(str(n))
    assert resume.first_time("a")  # the oldest id made room for newer ones
    assert not resume.first_time("9999")


def test_reconnect_attempts_reset_only_on_progress() -> None:
    resume = Resume(max_reconnects=2, backoff=0.0, max_backoff=0.0)
    cause = OSError("cut")
    resume.next_delay(cause)
    resume.next_delay(cause)
    assert resume.first_time(None)  # a new event is progress
    resume.next_delay(cause)
    resume.first_time("x")
    resume.next_delay(cause)
    resume.first_time("x")  # a repeat is not
    resume.next_delay(cause)
    with pytest.raises(TransportError, match="2 reconnect attempts"):
        resume.next_delay(cause)
    assert resume.reconnects == 5


def test_stream_event_helpers() -> None:
    values = StreamEvent("values", {"x": 1, "__interrupt__": [{"id": "i", "value": "ok?"}]})
    assert values.values == {"x": 1, "__interrupt__": [{"id": "i", "value": "ok?"}]}
    assert values.interrupts == [Interrupt(id="i", value="ok?")]
    assert values.updates is None and values.error is None and values.run_metadata is None

    sub = StreamEvent("updates|child:abc|grand:def", {"node": {"a": 1}})
    assert (sub.mode, sub.namespace, sub.updates) == (
        "updates",
        ("child:abc", "grand:def"),
        {"node": {"a": 1}},
    )

    partial = StreamEvent("messages/partial", [{"type": "ai", "content": "Hel"}])
    assert partial.mode == "messages" and partial.messages == [{"type": "ai", "content": "Hel"}]
    assert StreamEvent("messages/metadata", {"m1": {}}).messages is None
    chunk = StreamEvent("messages", [{"type": "AIMessageChunk", "content": "H"}, {"node": "n"}])
    assert chunk.messages == [{"type": "AIMessageChunk", "content": "H"}]

    assert StreamEvent("custom", {"progress": 0.5}).custom == {"progress": 0.5}
    assert StreamEvent("values", {}).custom is None
    assert StreamEvent("end").is_terminal and not StreamEvent("values", {}).is_terminal
    assert StreamEvent("error", "boom").error == StreamError(error="Error", message="boom")


async def test_run_check_failures_are_retried_and_a_gone_run_ends_the_stream(
    server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    server.on("POST", CREATE, sse_response([sse(META)], headers=HEADERS))
    server.on(
        "GET",
        RUN,
        httpx.ConnectError("restarting"),  # check fails: reconnect
        httpx.Response(503),  # check answers 5xx: reconnect
        httpx.Response(404, json={"detail": "gone"}),  # the run is gone: stop quietly
    )
    server.on("GET", JOIN, sse_response([sse(V1)]), sse_response([sse(V2)]))
    events = await collect(client.runs.stream(T, "agent"))
    assert [e.id for e in events] == ["1", "2", "3"]
    assert len(server.calls("GET", RUN)) == 3 and len(sleeps) == 2


async def test_a_run_check_with_an_unreadable_body_ends_the_stream(
    server: FakeServer, client: Any
) -> None:
    server.on("POST", CREATE, sse_response([sse(META)], headers=HEADERS))
    server.on("GET", RUN, httpx.Response(200, text="<html>"))
    assert len(await collect(client.runs.stream(T, "agent"))) == 1


async def test_first_request_retries(server: FakeServer, client: Any, sleeps: list[float]) -> None:
    # a join stream (GET) is retried on a connection failure; a run create only if unsent
    server.on("GET", JOIN, httpx.ReadError("reset"), sse_response([sse(END)]))
    assert [e.event for e in await collect(client.runs.join_stream(T, R))] == ["end"]
    server.on("POST", CREATE, httpx.ConnectError("refused"), sse_response([sse(META, END)]))
    assert len(await collect(client.runs.stream(T, "agent"))) == 2
    server.on("POST", "/runs/stream", httpx.Response(503, json={"detail": "busy"}))
    with pytest.raises(ServerError, match="busy"):  # not safe to repeat
        await collect(client.runs.stream(None, "agent"))
    assert len(sleeps) == 2


async def test_stream_as_context_manager_and_collect(
    server: FakeServer, client: Any, flavour: str
) -> None:
    server.on("POST", CREATE, sse_response([sse(META, V1, END)], headers=HEADERS))
    server.on("POST", "/runs/stream", sse_response([sse(META, END)]))
    if flavour == "sync":
        with client.runs.stream(T, "agent") as stream:
            first = next(stream)
        assert stream.collect() == []  # closed by the with block
        events = client.runs.stream(None, "agent").collect()
    else:
        async with client.runs.stream(T, "agent") as stream:
            first = await stream.__anext__()
        assert await stream.collect() == []
        events = await client.runs.stream(None, "agent").collect()
    assert first.event == "metadata" and stream.thread_id == T
    assert [e.event for e in events] == ["metadata", "end"]
