"""Replay of the thread log across read pages (both dialects): every event once, in seq
order, with its stored id and timestamp, whatever the page size; a cursor inside a page
resumes right after it; subscription filters see each page's events as they see the whole
log; the SSE frames of the pages are the frames of the events one by one."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.api.sse import format_event, format_events
from app.db import sealed
from app.db.sealed import DecryptionFailed, Keyring
from app.db.tables import thread_events
from app.runs.events import EventHub
from app.runs.fencing import FencingToken
from app.runs.threadlog import log as threadlog
from app.runs.threadlog.filters import parse_subscription
from app.runs.threadlog.log import LogEvent, ThreadLog
from tests.integration.threadlog_rows import seed_thread_run

PAGE = 7  # small pages: 40 events cross five page boundaries


def _events(n: int) -> list[tuple[str, list[str], Any]]:
    out: list[tuple[str, list[str], Any]] = []
    for i in range(n):
        if i % 5 == 0:
            out.append(("custom", ["sub:1"], {"name": "progress" if i % 2 else "other", "i": i}))
        elif i % 3 == 0:
            out.append(("values", [], {"i": i, "text": 'quote " and \\ é'}))
        else:
            out.append(("messages", ["sub:1", "deep:2"] if i % 2 else [], {"i": i}))
    return out


async def _replay(log: ThreadLog, thread_id: str, since: int, last: int) -> list[list[LogEvent]]:
    pages: list[list[LogEvent]] = []
    async for batch in log.follow(tenant_id="t1", thread_id=thread_id, since=since, heartbeat=30):
        if batch:
            pages.append(batch)
            if batch[-1].seq >= last:
                break
    return pages


async def test_replay_across_pages(engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threadlog, "_READ_BATCH", PAGE)
    thread_id, run_id = await seed_thread_run(engine)
    log = ThreadLog(engine, EventHub(engine, retention_seconds=60))
    token = FencingToken(run_id, 1)
    written = _events(40)
    for start in range(0, len(written), 9):  # several appends: several created_at values
        chunk = written[start : start + 9]
        await log.append(tenant_id="t1", thread_id=thread_id, token=token, events=chunk)
    async with engine.connect() as conn:
        stored = (
            await conn.execute(
                select(thread_events.c.seq, thread_events.c.created_at)
                .where(thread_events.c.thread_id == thread_id)
                .order_by(thread_events.c.seq)
            )
        ).all()
    stamps = {int(r.seq): int(r.created_at.timestamp() * 1000) for r in stored}

    pages = await _replay(log, thread_id, 0, 40)
    assert [len(p) for p in pages] == [7, 7, 7, 7, 7, 5]
    events = [ev for page in pages for ev in page]
    assert [ev.seq for ev in events] == list(range(1, 41))
    assert [ev.event_id for ev in events] == [str(s) for s in range(1, 41)]
    assert [ev.method for ev in events] == [m for m, _, _ in written]
    assert [ev.namespace for ev in events] == [ns for _, ns, _ in written]
    assert {ev.seq: ev.timestamp for ev in events} == stamps

    # another tenant's read of the same thread id: nothing
    assert await log.read_after(tenant_id="t2", thread_id=thread_id, since=0) == []

    # a cursor inside a page: the rest, once, from the next seq
    resumed = [ev.seq for page in await _replay(log, thread_id, 10, 40) for ev in page]
    assert resumed == list(range(11, 41))

    # filters page by page are the filter over the whole log
    sub = parse_subscription(
        {"channels": ["messages", "custom:progress"], "namespaces": [["sub"]], "depth": 0}
    )
    kept = [ev.seq for page in pages for ev in page if sub.matches(ev)]
    assert kept == [ev.seq for ev in events if sub.matches(ev)]
    assert kept and all(
        (ev.method == "messages" and ev.namespace == ["sub:1"])
        or (ev.method == "custom" and ev.data_name() == "progress")
        for ev in events
        if ev.seq in kept
    )
    assert not any(ev.namespace == ["sub:1", "deep:2"] for ev in events if ev.seq in kept)

    # the pages' SSE bytes are the events' frames one by one
    framed = b"".join(
        format_events((ev.method, ev.envelope(), str(ev.seq)) for ev in page) for page in pages
    )
    assert framed == b"".join(format_event(ev.method, ev.envelope(), str(ev.seq)) for ev in events)


async def test_sealed_payloads_replay_as_written(engine: AsyncEngine) -> None:
    """With an at-rest key the log stores sealed payloads; a replay opens each one (the
    fast plaintext test must not pass a sealed row through), plaintext written before the
    key still reads, and without the key a sealed row fails loudly, never as its envelope."""
    thread_id, run_id = await seed_thread_run(engine)
    log = ThreadLog(engine, EventHub(engine, retention_seconds=60))
    token = FencingToken(run_id, 1)
    plain = [("values", [], {"before": "the key"})]
    secret = [("messages", ["sub:1"], {"i": i, "text": f"secret {i} é"}) for i in range(5)]
    await log.append(tenant_id="t1", thread_id=thread_id, token=token, events=plain)
    sealed.install(Keyring.from_keys("k" * 32))
    try:
        await log.append(tenant_id="t1", thread_id=thread_id, token=token, events=secret)
        async with engine.connect() as conn:
            stored = (
                await conn.execute(
                    select(thread_events.c.data)
                    .where(thread_events.c.thread_id == thread_id)
                    .order_by(thread_events.c.seq)
                )
            ).scalars()
            stored_data = list(stored)
        assert not sealed.is_sealed_text(stored_data[0])
        assert all(sealed.is_sealed_text(d) and "secret" not in d for d in stored_data[1:])
        pages = await _replay(log, thread_id, 0, 6)
        events = [ev for page in pages for ev in page]
        assert [json.loads(ev.data) for ev in events] == [d for _, _, d in plain + secret]
        assert [json.loads(ev.envelope())["params"]["data"] for ev in events] == [
            d for _, _, d in plain + secret
        ]
    finally:
        sealed.install(Keyring())
    with pytest.raises(DecryptionFailed):
        await log.read_after(tenant_id="t1", thread_id=thread_id, since=0)
