"""`ThreadStreamRuns.drive` logs a protocol run's root `running` before anything that can fail:
a run whose preparation fails (its kwargs, the progress check of a retried attempt, the check
whether an earlier attempt logged it) before the graph starts still reads `running` then
`failed` on the thread log, on both dialects."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.tables import runs, thread_events
from app.db.types import utcnow
from app.runs.events import EventHub
from app.runs.fencing import FencingToken
from app.runs.protocol_runs import _LINGER_SECONDS, PROTOCOL_MARKER, ThreadStreamRuns, _BatchWriter
from app.runs.queue import ClaimedRun
from app.runs.threadlog.codec import decode_payload
from app.runs.threadlog.log import ThreadLog
from tests.integration.threadlog_rows import seed_thread_run


class _NoGraphs:
    """The graph registry of a run that must fail before its graph is opened."""

    def open(self, *_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("the graph was opened")

    def stream_transformers(self, _graph_id: str) -> list[Any]:
        raise AssertionError("the graph was opened")


def _claimed(thread_id: str, run_id: str, attempt: int, kwargs: dict[str, Any]) -> ClaimedRun:
    return ClaimedRun(
        run_id=run_id,
        tenant_id="t1",
        thread_id=thread_id,
        assistant_id=run_id,
        graph_id="g",
        kwargs=kwargs,
        metadata={},
        attempt=attempt,
        temporary=False,
        cancel_action=None,
        created_at=utcnow(),
    )


async def _root_lifecycle(engine: AsyncEngine, thread_id: str) -> list[str]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(thread_events.c.method, thread_events.c.data)
            .where(thread_events.c.thread_id == thread_id)
            .order_by(thread_events.c.seq)
        )
        return [json.loads(decode_payload(r.data))["event"] for r in rows]


async def _nothing() -> None:
    return None


class _FailingLogCheck(ThreadStreamRuns):
    """A retried attempt whose read of the log (did an earlier attempt log `running`?)
    fails: the database refused the read."""

    async def _logged_before(self, run: ClaimedRun) -> bool:
        raise RuntimeError("the log read failed")


@pytest.mark.parametrize("failure", ["kwargs", "has_progress", "log_check"])
async def test_failure_before_the_graph_logs_running_first(
    engine: AsyncEngine, failure: str
) -> None:
    # attempt 2 with nothing logged yet (its first attempt died before logging): the progress
    # check runs, and `running` is still this run's to log
    thread_id, run_id = await seed_thread_run(engine, attempt=2, status="running")
    kwargs: dict[str, Any] = {"config": {"configurable": {PROTOCOL_MARKER: True}}}
    if failure == "kwargs":
        kwargs["command"] = {"update": [1]}  # not (key, value) pairs: graph_input refuses it

    async def has_progress() -> bool:
        if failure == "has_progress":
            raise RuntimeError("the checkpoint read failed")
        return False

    runner = (_FailingLogCheck if failure == "log_check" else ThreadStreamRuns)(
        engine=engine,
        hub=EventHub(engine, retention_seconds=60),
        graphs=_NoGraphs(),
        run_timeout=None,
    )
    run = _claimed(thread_id, run_id, 2, kwargs)
    with pytest.raises((TypeError, RuntimeError)):
        await runner.drive(
            run,
            None,
            classic=_nothing,
            saver=None,
            store=None,
            has_progress=has_progress,
            check_lease=_nothing,
        )
    assert await _root_lifecycle(engine, thread_id) == ["running"]
    # the executor settles it as an error, then the terminal follows
    async with engine.begin() as conn:
        await conn.execute(update(runs).where(runs.c.run_id == run_id).values(status="error"))
    await runner.ended(run, "error", {"error": "TypeError", "message": "bad input"})
    assert await _root_lifecycle(engine, thread_id) == ["running", "failed"]


class _CountingAppends(ThreadLog):
    appends = 0
    sizes: list[int]

    async def append(self, **kwargs: Any) -> None:
        self.appends += 1
        self.sizes.append(len(kwargs["events"]))
        await super().append(**kwargs)


async def test_a_token_stream_goes_in_few_appends_in_order(engine: AsyncEngine) -> None:
    """The batch writer of a protocol run: its first events go alone (a client waits on
    them), then a burst of tokens shares appends (one append per token would cost the server
    a statement each), and every event is stored once, in the order put."""
    thread_id, run_id = await seed_thread_run(engine)
    log = _CountingAppends(engine, EventHub(engine, retention_seconds=60))
    log.sizes = []
    writer = _BatchWriter(log, _claimed(thread_id, run_id, 1, {}), FencingToken(run_id, 1))
    writer.put([("lifecycle", [], {"event": "running"})])
    await asyncio.sleep(0.05)
    writer.put([("values", [], {"n": 0})])
    await asyncio.sleep(0.05)
    assert log.sizes == [1, 1]  # alone, at once
    started = time.monotonic()
    for i in range(1000):  # a model streaming tokens, one at a time, 0.5 ms apart
        writer.put([("messages", [], {"i": i})])
        await asyncio.sleep(0.0005)
    await writer.close()
    took = time.monotonic() - started
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(thread_events.c.seq, thread_events.c.data)
            .where(thread_events.c.thread_id == thread_id)
            .order_by(thread_events.c.seq)
        )
        stored = [json.loads(decode_payload(r.data)) for r in rows]
    assert stored[2:] == [{"i": i} for i in range(1000)]
    assert sum(log.sizes) == 1002
    # in a burst each append first lingers, so there are at most this many (without the
    # linger: one per few tokens, several hundred in that time on an unloaded machine)
    assert log.appends - 2 <= took / _LINGER_SECONDS + 3, (log.appends, took)
