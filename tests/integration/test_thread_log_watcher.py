"""Idle thread-log followers share one backstop poll per thread per process (both dialects):
an append whose wake-up never reached this process is still delivered to every follower, the
idle database load does not grow with the number of followers, the watcher lets go of a thread
when its last follower leaves, and a failed read ends a follower with LogReadFailed (the
routes turn it into the protocol's error frame) instead of an unhandled error."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine
from app.runs.events import EventHub
from app.runs.fencing import FencingToken
from app.runs.threadlog.log import LogReadFailed, ThreadLog
from tests.integration.threadlog_rows import seed_thread_run

POLL = 0.05  # SQLite's backstop; PostgreSQL's is 5x (NOTIFY carries other processes')


class _CountingReads(ThreadLog):
    """Counts the followers' own reads of the log once each has returned: a read counted when
    it started could still wait behind aiosqlite's one thread on a loaded machine, and its
    SELECT then fell into the idle window below (26 statements in one CI run, against at most
    16: first reads counted at their start that had not yet run)."""

    reads = 0

    async def read_after(self, *, tenant_id: str, thread_id: str, since: int) -> list[Any]:
        rows = await super().read_after(tenant_id=tenant_id, thread_id=thread_id, since=since)
        self.reads += 1
        return rows


async def _first_event(log: ThreadLog, thread_id: str) -> int:
    async for batch in log.follow(tenant_id="t1", thread_id=thread_id, since=0, heartbeat=30):
        if batch:
            return batch[0].seq
    raise AssertionError("follow ended")


async def test_followers_share_one_poll_and_get_missed_wakeups(engine: AsyncEngine) -> None:
    hub = EventHub(engine, retention_seconds=60)
    log = _CountingReads(engine, hub, poll_seconds=POLL)
    backstop = POLL * (5 if hub.cross_process else 1)
    pairs = [await seed_thread_run(engine) for _ in range(2)]
    followers = [
        asyncio.create_task(_first_event(log, thread_id))
        for thread_id, _ in pairs
        for _ in range(10)
    ]
    # every follower's first read returned and it went idle: waited on, not slept (on a loaded
    # machine 20 first reads can outlast a fixed sleep, and then count as idle reads below)
    deadline = asyncio.get_running_loop().time() + 30
    while log.reads < 20:
        assert asyncio.get_running_loop().time() < deadline, log.reads
        await asyncio.sleep(POLL / 5)
    await asyncio.sleep(backstop)  # a poll that raced a first read wakes it in vain, once
    watcher = hub.log_watcher(backstop)
    assert watcher.watched == 2
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    event.listen(engine.sync_engine, "before_cursor_execute", count)
    try:
        await asyncio.sleep(backstop * 10)
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", count)
    # 20 idle followers: about one statement per interval (both threads in it), where a poll
    # per follower would be about 200
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert 1 <= len(selects) <= 16, (len(selects), selects[:3])
    # another process's append: its wake-up never reaches this hub, the shared poll does
    writer = ThreadLog(engine, EventHub(engine, retention_seconds=60))
    for thread_id, run_id in pairs:
        await writer.append(
            tenant_id="t1",
            thread_id=thread_id,
            token=FencingToken(run_id, 1),
            events=[("values", [], {"x": 1})],
        )
    assert await asyncio.wait_for(asyncio.gather(*followers), timeout=10) == [1] * 20
    await asyncio.sleep(0)
    assert watcher.watched == 0  # the last follower of each thread let go of it


async def test_new_idle_followers_are_not_woken_in_a_burst(engine: AsyncEngine) -> None:
    """The poll compares the last seq with each follower's cursor: followers of threads with
    nothing new are left alone, even on the poll that first sees their thread (waking every
    new thread once made 1,000 new idle subscribers 1,000 reads in one burst)."""
    hub = EventHub(engine, retention_seconds=60)
    log = ThreadLog(engine, hub, poll_seconds=POLL)
    backstop = POLL * (5 if hub.cross_process else 1)
    watcher = hub.log_watcher(backstop)
    polls_before = watcher.polls
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    event.listen(engine.sync_engine, "before_cursor_execute", count)
    followers = [asyncio.create_task(_first_event(log, str(uuid.uuid4()))) for _ in range(40)]
    try:
        # waited on, not slept: on a loaded machine 40 first reads can outlast a fixed sleep.
        # Every follower is watched first, then three polls that see all 40 threads run, so a
        # wake-up from the first two would have had a whole interval to turn into a read.
        deadline = asyncio.get_running_loop().time() + 30
        while watcher.watched < 40:
            assert asyncio.get_running_loop().time() < deadline, watcher.watched
            await asyncio.sleep(POLL / 5)
        polls_watched = watcher.polls
        while watcher.polls - polls_watched < 3:
            assert asyncio.get_running_loop().time() < deadline, watcher.polls - polls_watched
            await asyncio.sleep(POLL / 5)
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", count)
        for task in followers:
            task.cancel()
        await asyncio.gather(*followers, return_exceptions=True)
    polls = watcher.polls - polls_before
    assert polls >= 2, polls
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    # each follower's own first read, plus the polls: no follower was woken to read again
    assert len(reads) - polls <= 40, (len(reads), polls)


async def test_a_failed_read_ends_the_follower_with_log_read_failed(
    engine: AsyncEngine, tmp_path: Any
) -> None:
    if engine.dialect.name == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path}/missing/dir/x.db"
    else:
        url = "postgresql+asyncpg://postgres@127.0.0.1:1/nothing_listens"
    broken = create_engine(url)
    try:
        log = ThreadLog(broken, EventHub(broken, retention_seconds=60), poll_seconds=POLL)
        with pytest.raises(LogReadFailed) as failed:
            await asyncio.wait_for(_first_event(log, str(uuid.uuid4())), timeout=30)
        envelope = failed.value.envelope()
        assert envelope["type"] == "error" and envelope["error"] == "unknown_error"
        assert "nothing_listens" not in envelope["message"]  # no connection details leak
    finally:
        await broken.dispose()
