"""Store figures for the console's overview (one tenant, expired items excluded)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.access import read
from app.db.types import utcnow
from app.store import queries


async def count_items(engine: AsyncEngine, *, tenant_id: str) -> int:
    """How many live items the tenant has in the Store."""
    async with read(engine) as conn:
        value = (await conn.execute(queries.count_live_items(tenant_id, utcnow()))).scalar()
    return int(value or 0)
