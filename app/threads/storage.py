"""Per-thread storage figures (GET /threads/{id}/storage): what the thread's checkpoints,
channel values, pending writes and stream events occupy, summed by the database."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.access import read
from app.errors import NotFound, ValidationFailed
from app.threads import queries as q


async def thread_storage(engine: AsyncEngine, *, tenant_id: str, thread_id: str) -> dict[str, Any]:
    try:
        thread_id = str(uuid.UUID(thread_id))
    except ValueError:
        raise ValidationFailed(f"thread_id: {thread_id!r} is not a valid UUID") from None
    statements = q.storage_statements(engine.dialect.name, tenant_id=tenant_id, thread_id=thread_id)
    async with read(engine) as conn:
        found = await conn.execute(q.THREAD_METADATA, q.thread_key(tenant_id, thread_id))
        if found.first() is None:
            raise NotFound(f"Thread '{thread_id}' not found")
        out: dict[str, Any] = {"thread_id": thread_id}
        for name in ("checkpoints", "writes", "events"):
            count, nbytes = (await conn.execute(statements[name])).one()
            out[name] = {"count": int(count), "bytes": int(nbytes)}
        channels = (await conn.execute(statements["channel_values"])).all()
    per_channel = {row[0]: {"count": int(row[1]), "bytes": int(row[2])} for row in channels}
    out["channel_values"] = {
        "count": sum(c["count"] for c in per_channel.values()),
        "bytes": sum(c["bytes"] for c in per_channel.values()),
        "channels": per_channel,
    }
    out["total_bytes"] = sum(
        out[name]["bytes"] for name in ("checkpoints", "writes", "events", "channel_values")
    )
    return out
