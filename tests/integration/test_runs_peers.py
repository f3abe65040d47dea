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
