"""Followers of a thread log take this process's appends from memory (the log watcher's tail,
handed over after the append committed) and read the database for everything else: the
events they deliver are byte for byte what a replay reads back, every seq exactly once, in
order, with other writers' appends (another process, whose wake-up arrives as a NOTIFY)
interleaved. Both dialects."""

from __future__ import annotations

import asyncio

from sqlalchemy.ext.asyncio import AsyncEngine

from app.runs.events import EventHub
from app.runs.fencing import FencingToken
from app.runs.threadlog.log import LogEvent, ThreadLog
from app.runs.threadlog.watcher import Tail
from tests.integration.threadlog_rows import seed_thread_run


class _CountingLog(ThreadLog):
    """Counts the follower's database reads."""

    reads = 0

    async def read_after(self, *, tenant_id: str, thread_id: str, since: int) -> list[LogEvent]:
        self.reads += 1
        return await super().read_after(tenant_id=tenant_id, thread_id=thread_id, since=since)


async def _collect(log: ThreadLog, thread_id: str, count: int) -> list[LogEvent]:
    got: list[LogEvent] = []
    async for batch in log.follow(tenant_id="t1", thread_id=thread_id, since=0, heartbeat=30):
        got.extend(batch)
        if len(got) >= count:
            return got
    raise AssertionError("follow ended")


def _events(i: int, n: int) -> list[tuple[str, list[str], object]]:
    return [
        ("messages", ["sub:1"] if k % 3 == 0 else [], {"i": i, "k": k, "text": f"w{k} é \u2603"})
        for k in range(n)
    ]


async def test_local_appends_come_from_memory_as_stored(engine: AsyncEngine) -> None:
    hub = EventHub(engine, retention_seconds=60)
    log = _CountingLog(engine, hub, poll_seconds=30)  # no backstop poll during the test
    thread_id, run_id = await seed_thread_run(engine)
    token = FencingToken(run_id, 1)
    follower = asyncio.create_task(_collect(log, thread_id, 30 * 7))
    await asyncio.sleep(0.2)  # it read the (empty) log and waits
    assert log.reads == 1
    for i in range(30):
        await log.append(tenant_id="t1", thread_id=thread_id, token=token, events=_events(i, 7))
        await asyncio.sleep(0)  # the follower takes each batch (30 wake-ups)
    live = await asyncio.wait_for(follower, timeout=10)
    # a database read per wake-up would be 30 or more
    assert log.reads == 1, log.reads
    stored = await log.read_after(tenant_id="t1", thread_id=thread_id, since=0)
    assert [e.seq for e in live] == list(range(1, 211))
    assert [e.envelope() for e in live] == [e.envelope() for e in stored]


async def test_other_writers_events_are_read_from_the_database(engine: AsyncEngine) -> None:
    hub = EventHub(engine, retention_seconds=60)
    log = _CountingLog(engine, hub, poll_seconds=30)
    other = ThreadLog(engine, EventHub(engine, retention_seconds=60))  # another process
    thread_id, run_id = await seed_thread_run(engine)
    token = FencingToken(run_id, 1)
    sizes = [5, 3, 4, 2, 6, 1, 1, 8]
    follower = asyncio.create_task(_collect(log, thread_id, sum(sizes)))
    await asyncio.sleep(0.2)
    for i, size in enumerate(sizes):
        if i % 2:
            await other.append(
                tenant_id="t1", thread_id=thread_id, token=token, events=_events(i, size)
            )
            if i % 4 == 1:
                hub.wake_thread(thread_id)  # its NOTIFY arrives (others: not yet, or never)
        else:
            await log.append(
                tenant_id="t1", thread_id=thread_id, token=token, events=_events(i, size)
            )
        if i % 3 == 0:
            await asyncio.sleep(0.01)
    hub.wake_thread(thread_id)  # the last NOTIFY (or the backstop poll) comes
    live = await asyncio.wait_for(follower, timeout=10)
    stored = await log.read_after(tenant_id="t1", thread_id=thread_id, since=0)
    assert [e.seq for e in live] == list(range(1, sum(sizes) + 1))
    assert [e.envelope() for e in live] == [e.envelope() for e in stored]
    assert log.reads > 1  # the other writer's events came from the database


def _ev(seq: int, data: str = "{}") -> LogEvent:
    return LogEvent(seq, str(seq), "values", "[]", data, 0)


def test_tail_vouches_only_for_consecutive_events_reaching_the_cursor() -> None:
    tail = Tail()
    assert tail.after(0) == []  # nothing appended here
    tail.add([_ev(5), _ev(6)])
    assert tail.after(3) is None  # seq 4 is not held: read the database
    assert [e.seq for e in tail.after(4) or []] == [5, 6]
    assert [e.seq for e in tail.after(5) or []] == [6]
    assert tail.after(6) == []
    gen = tail.gen
    tail.add([_ev(7)])
    assert tail.gen == gen
    tail.add([_ev(3), _ev(4)])  # another writer's earlier seqs committed after ours
    assert tail.gen == gen + 1  # followers read the database
    assert [e.seq for e in tail.after(2) or []] == [3, 4]
    assert tail.after(7) == []


def test_tail_lets_go_of_its_oldest_but_never_of_the_newest() -> None:
    tail = Tail()
    big = '"' + "x" * (3 << 20) + '"'  # a 3 MB state: two of them exceed what a tail keeps
    tail.add([_ev(1, big)])
    tail.add([_ev(2, big)])
    assert [e.seq for e in tail.events] == [2]
    assert tail.after(0) is None  # seq 1 is no longer held: read the database
    assert [e.seq for e in tail.after(1) or []] == [2]
    tail.add([_ev(3, big + big)])  # larger than the cap alone: still held, as the newest
    assert [e.seq for e in tail.events] == [3]
    assert tail.after(1) is None
    assert tail.size == len(big) * 2
    tail.add([_ev(n) for n in range(4, 5000)])
    assert len(tail.events) == 4096 and tail.events[-1].seq == 4999
    assert tail.after(3) is None


async def test_another_tenants_follower_of_the_same_thread_id_gets_nothing(
    engine: AsyncEngine,
) -> None:
    """Tenant t2 follows t1's thread id (to t2 an unknown thread, which a stream may wait on)
    while t1 appends and t1's own follower takes those appends from the tail: t2's follower
    is woken by the same thread's wake-ups but delivers nothing but heartbeats."""
    hub = EventHub(engine, retention_seconds=60)
    log = _CountingLog(engine, hub, poll_seconds=30)
    thread_id, run_id = await seed_thread_run(engine)
    token = FencingToken(run_id, 1)
    seen: list[LogEvent] = []
    beats = 0

    async def intruder() -> None:
        nonlocal beats
        async for batch in log.follow(tenant_id="t2", thread_id=thread_id, since=0, heartbeat=0.05):
            seen.extend(batch)
            beats += not batch

    theirs = asyncio.create_task(intruder())
    mine = asyncio.create_task(_collect(log, thread_id, 10 * 4))
    await asyncio.sleep(0.2)
    for i in range(10):
        await log.append(tenant_id="t1", thread_id=thread_id, token=token, events=_events(i, 4))
        await asyncio.sleep(0)
    assert [e.seq for e in await asyncio.wait_for(mine, timeout=10)] == list(range(1, 41))
    await asyncio.sleep(0.3)  # the intruder had every wake-up and a few heartbeats
    theirs.cancel()
    await asyncio.gather(theirs, return_exceptions=True)
    assert seen == [] and beats >= 2
