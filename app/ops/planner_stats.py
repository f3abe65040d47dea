"""Fresh planner statistics while graphkeep's tables are young (PostgreSQL).

Every statement runs prepared, and PostgreSQL caches a generic plan per connection after five
executions. That plan is kept until the table's statistics change, which autovacuum does at
most once a minute (`autovacuum_naptime`) and only after 10 % of the rows changed. A plan made
while a table was nearly empty sees every index as equally cheap: it looked a run up by
`(tenant_id, created_at)` and filtered on `run_id`, and it found a thread's other active runs
by reading all of `runs` (`Seq Scan ... Rows Removed by Filter: 6488`). Such plans read the
whole table on every run and grow slower with it until the next autovacuum; on a new
deployment under load the settle cost 3.2 ms of PostgreSQL time where fresh plans take 0.35 ms
(auto_explain and pg_stat_statements, bench/server_bench.py on a fresh database).

This keeper analyzes a table once at least `FLOOR_ROWS`, and at least half, of its rows changed
since its last analysis (a table that only grew has doubled): a handful of ANALYZEs while a
table is young, none once it is large (autovacuum's 10 % rule comes first there). ANALYZE
invalidates the cached plans in every session, so the next execution plans with the table as
it is. It takes only a lock that reads and writes do not wait for, and `SKIP_LOCKED` skips a
table another process is analyzing. A table this role does not own (migrations ran as another
role) is left to autovacuum: ANALYZE would only warn, on every check.

An operator task over catalog statistics, not tenant data: it takes no tenant (the documented
exception of app/ops/queries.py). SQLite keeps no cached generic plans: nothing to do there.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.access import read
from app.db.tables import metadata
from app.ops import queries

log = logging.getLogger(__name__)

# Fewer changed rows never call for an analysis: a plan over so few rows costs little, whatever
# it chose.
FLOOR_ROWS = 1000


async def analyze_grown_tables(engine: AsyncEngine, *, timeout_seconds: float) -> list[str]:
    """ANALYZE graphkeep's tables of which at least FLOOR_ROWS, and at least half the rows,
    changed since their last analysis; the names analyzed."""
    names = sorted(metadata.tables)
    async with asyncio.timeout(timeout_seconds):
        async with read(engine) as conn:
            grown = list((await conn.execute(queries.grown_tables(names, FLOOR_ROWS))).scalars())
            for name in grown:
                await conn.execute(queries.analyze(engine.dialect, name))
    return grown


async def keep_planner_stats(
    engine: AsyncEngine, *, interval_seconds: float, timeout_seconds: float
) -> None:
    """Check every `interval_seconds` until cancelled; a failed check is logged and retried."""
    while True:
        await asyncio.sleep(interval_seconds)
        try:
            analyzed = await analyze_grown_tables(engine, timeout_seconds=timeout_seconds)
        except Exception as exc:  # the database may be down: the next check retries
            log.info("planner statistics not checked", extra={"error": type(exc).__name__})
            continue
        if analyzed:
            log.debug("analyzed grown tables", extra={"tables": analyzed})
