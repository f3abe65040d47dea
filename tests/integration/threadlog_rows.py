"""Rows the thread-log tests start from: a busy thread with one run of a given attempt."""

from __future__ import annotations

import uuid

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.tables import runs, threads
from app.db.types import utcnow


async def seed_thread_run(
    engine: AsyncEngine, *, attempt: int = 1, status: str = "running"
) -> tuple[str, str]:
    thread_id, run_id, now = str(uuid.uuid4()), str(uuid.uuid4()), utcnow()
    async with engine.begin() as conn:
        await conn.execute(
            insert(threads).values(
                thread_id=thread_id,
                tenant_id="t1",
                status="busy",
                metadata={},
                config={},
                interrupts={},
                created_at=now,
                updated_at=now,
                state_updated_at=now,
            )
        )
        await conn.execute(
            insert(runs).values(
                run_id=run_id,
                tenant_id="t1",
                thread_id=thread_id,
                assistant_id=run_id,
                graph_id="g",
                status=status,
                metadata={},
                kwargs={},
                multitask_strategy="enqueue",
                created_at=now,
                updated_at=now,
                available_at=now,
                attempt=attempt,
            )
        )
    return thread_id, run_id
