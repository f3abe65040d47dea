"""Readiness: the database answers and its schema is at the code's head revision."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import migrate
from app.db.access import read
from app.ops import queries

log = logging.getLogger(__name__)

# Readiness must answer fast even when the database hangs: a probe that blocks is worse than
# one that says "not ready".
MAX_READY_TIMEOUT_SECONDS = 5.0

_head: list[str | None] = []


async def _head_revision() -> str | None:
    # The head is fixed for the life of the process; reading the scripts touches files.
    if not _head:
        _head.append(await asyncio.to_thread(migrate.head_revision))
    return _head[0]


@dataclass(frozen=True)
class Readiness:
    """The outcome of one readiness check."""

    database: bool
    schema_at_head: bool
    detail: str | None = None

    @property
    def ready(self) -> bool:
        return self.database and self.schema_at_head


async def _probe(engine: AsyncEngine) -> str | None:
    async with read(engine) as conn:
        await conn.execute(queries.PING)
    return await migrate.current_revision(engine)


async def check_readiness(engine: AsyncEngine, *, timeout_seconds: float) -> Readiness:
    """SELECT 1 and compare the schema revision with head, within a short timeout."""
    timeout = min(timeout_seconds, MAX_READY_TIMEOUT_SECONDS)
    try:
        async with asyncio.timeout(timeout):
            current = await _probe(engine)
    except TimeoutError:
        return Readiness(False, False, f"database did not answer within {timeout:g}s")
    except Exception as exc:  # any driver error means "not ready", never a 500
        log.warning("readiness: database unreachable", extra={"error": type(exc).__name__})
        return Readiness(False, False, "database unreachable")
    head = await _head_revision()
    if current != head:
        return Readiness(True, False, "schema is not at head; run `graphkeep migrate`")
    return Readiness(True, True)
