"""A process sends NOTIFYs only while it knows another process listens (app/runs/peers.py).
Real PostgreSQL: a plain asyncpg LISTEN connection hears what each hub sends; hubs on their
own engines stand for processes."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from app.db.access import transaction
from app.db.engine import create_engine
from app.runs.events import EventHub
from app.runs.notify import NOTIFY_CHANNEL, Kind, decode

pytestmark = pytest.mark.postgres


@pytest.fixture
async def heard(pg_url: str) -> Any:
    """Payloads on the channel, as a LISTEN connection that announces nothing hears them."""
    got: list[str] = []
    dsn = make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn)
    await conn.add_listener(NOTIFY_CHANNEL, lambda _c, _p, _ch, payload: got.append(payload))
    try:
        yield got
    finally:
        await conn.close()


async def _send_events(hub: EventHub, run_id: str) -> None:
    async with transaction(hub.engine) as conn:
        await hub.notify(conn, Kind.EVENTS, run_id, thread_id="t")


async def _until(check: Any, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


def _kinds(got: list[str], origin: str) -> list[str]:
    return [n.kind for p in got if (n := decode(p)) is not None and n.origin == origin]


async def test_a_lone_process_sends_no_notify_and_starts_once_another_appears(
    pg_url: str, heard: list[str]
) -> None:
    first_engine, second_engine = create_engine(pg_url), create_engine(pg_url)
    first = EventHub(first_engine, retention_seconds=60)
    second = EventHub(second_engine, retention_seconds=60)
    try:
        await first.start()
        await _until(lambda: Kind.HELLO in _kinds(heard, first.origin))
        assert first.alone
        await _send_events(first, "run-alone")
        await asyncio.sleep(0.3)
        assert Kind.EVENTS not in _kinds(heard, first.origin)  # nobody else: nothing sent

        await second.start()  # its hello is answered: each now knows the other
        await _until(lambda: not first.alone and not second.alone)
        await _send_events(first, "run-shared")
        await _until(lambda: Kind.EVENTS in _kinds(heard, first.origin))
        assert Kind.PRESENT in _kinds(heard, first.origin)
    finally:
        await first.stop()
        await second.stop()
        await first_engine.dispose()
        await second_engine.dispose()


async def test_a_hub_that_does_not_listen_always_notifies(pg_url: str, heard: list[str]) -> None:
    # it cannot know who listens (a process that only writes, or whose listener is down)
    engine = create_engine(pg_url)
    hub = EventHub(engine, retention_seconds=60)
    try:
        assert not hub.alone
        await _send_events(hub, "run-1")
        await _until(lambda: Kind.EVENTS in _kinds(heard, hub.origin))
    finally:
        await engine.dispose()


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_a_lone_server_queues_and_settles_runs_without_notify(
    pg_url: str, heard: list[str], make_client: Any
) -> None:
    """The run's own statements (the create that queues it, the settle) embed their NOTIFYs;
    those too are sent only while another process listens. A notifying commit holds the
    cluster-wide NOTIFY lock through its WAL flush, so a lone server paid it about twice per
    run for nobody."""
    client = await make_client()

    def app_origin() -> str | None:
        hellos = [n for p in heard if (n := decode(p)) is not None and n.kind is Kind.HELLO]
        return hellos[0].origin if hellos else None

    await _until(lambda: app_origin() is not None)  # its listener is up: it knows it is alone
    origin = str(app_origin())

    async def queued_run() -> tuple[str, str]:
        tid = str((await client.post("/threads", json={})).json()["thread_id"])
        # due in a moment: queued, not taken by a free local slot at once (that sends no `q`)
        body = {"assistant_id": "echo", "input": {"n": 1}, "after_seconds": 0.3}
        run = (await client.post(f"/threads/{tid}/runs", json=body)).json()
        assert run["status"] == "pending"
        joined = await client.get(f"/threads/{tid}/runs/{run['run_id']}/join")
        assert joined.status_code == 200, joined.text
        assert (await client.get(f"/threads/{tid}/runs/{run['run_id']}")).json()[
            "status"
        ] == "success"
        return tid, str(run["run_id"])

    await queued_run()
    await asyncio.sleep(0.3)  # a NOTIFY would be heard by now
    assert not {Kind.QUEUED, Kind.EVENTS} & set(_kinds(heard, origin)), heard

    peer_engine = create_engine(pg_url)
    peer = EventHub(peer_engine, retention_seconds=60)
    try:
        await peer.start()  # the app answers its hello: from now on it has someone to tell
        await _until(lambda: Kind.PRESENT in _kinds(heard, origin))
        tid, run_id = await queued_run()

        def events() -> list[tuple[str, str]]:
            return [
                (n.run_id, n.thread_id)
                for p in heard
                if (n := decode(p)) is not None and n.kind is Kind.EVENTS and n.origin == origin
            ]

        # the settle wakes the run's readers; the thread log's `running` row at its start
        # wakes the thread's readers only (no reader of the run's events finds anything new).
        # The join answers on the in-process wake: the listener may hear the NOTIFYs later.
        await _until(lambda: (run_id, tid) in events() and ("", tid) in events())
        assert Kind.QUEUED in _kinds(heard, origin), heard
        assert {e for e in events() if tid in e} == {(run_id, tid), ("", tid)}, events()
    finally:
        await peer.stop()
        await peer_engine.dispose()


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_a_wait_on_another_process_asks_for_no_events_and_wakes_at_the_end(
    heard: list[str], make_client: Any
) -> None:
    """runs/wait answers with the run's end only. Served by an API-only process while another
    process executes the run, it does not announce itself as a reader (`w`), which would make
    the executing process store and NOTIFY each batch of events as it comes; the run's final
    statement stores them all and its NOTIFY wakes the wait, long before a keep-alive."""
    api = await make_client(workers=0, stream_keepalive_seconds=30)
    await make_client(workers=2)  # executes the runs: another process, its own hub

    def kinds() -> list[Kind]:
        return [n.kind for p in heard if (n := decode(p)) is not None]

    # the executor's hello answered by the API's present: each knows the other
    await _until(lambda: kinds().count(Kind.HELLO) >= 2 and Kind.PRESENT in kinds())
    loop = asyncio.get_running_loop()
    for text in ("a", "b", "c"):
        tid = str((await api.post("/threads", json={})).json()["thread_id"])
        started = loop.time()
        body = {"assistant_id": "echo", "input": {"text": text}}
        answer = await api.post(f"/threads/{tid}/runs/wait", json=body)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"text": text}
        assert loop.time() - started < 10  # by the end's NOTIFY, not the 30 s keep-alive
    assert Kind.EVENTS in kinds()  # the ends were announced
    assert Kind.WATCH not in kinds(), heard
