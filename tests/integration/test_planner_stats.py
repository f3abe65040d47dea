"""The planner-statistics keeper (PostgreSQL): a generic plan cached while a table was empty
reads the whole table once it has grown, until its statistics change; the keeper analyzes a
grown table so the cached plan is replanned, and leaves an unchanged one alone."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from app.config import Settings
from app.db.engine import create_engine
from app.main import create_app
from app.ops.planner_stats import FLOOR_ROWS, analyze_grown_tables, keep_planner_stats
from tests.conftest import migrated_pg_database
from tests.pgcluster import free_port

pytestmark = pytest.mark.postgres

LOOKUP = "SELECT run_id FROM runs WHERE run_id = $1 AND tenant_id = $2"
ROWS = 3 * FLOOR_ROWS


@pytest.fixture
def fresh_pg(pg_url: str) -> Iterator[str]:
    """A migrated database of its own: table statistics are per database."""
    with migrated_pg_database("gk_planstats") as url:
        yield url


@pytest.fixture
async def raw(fresh_pg: str) -> AsyncIterator[asyncpg.Connection]:
    """A plain session, as a pooled serving connection is: its prepared plans live with it."""
    dsn = make_url(fresh_pg).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn)
    try:
        yield conn
    finally:
        await conn.close()


async def _grow(conn: asyncpg.Connection, rows: int) -> None:
    """`rows` threads with one run each, all of one tenant; their counts reach the statistics
    views at once (pg_stat_force_next_flush, PostgreSQL 15+)."""
    await conn.execute(
        "INSERT INTO threads (thread_id, tenant_id, status, metadata, config, values, "
        "interrupts, created_at, updated_at, state_updated_at) "
        "SELECT 'th' || g, 't', 'idle', '{}', '{}', '{}', '{}', now(), now(), now() "
        "FROM generate_series(1, $1) AS g",
        rows,
    )
    await conn.execute(
        "INSERT INTO runs (run_id, tenant_id, thread_id, assistant_id, graph_id, status, "
        "metadata, kwargs, multitask_strategy, created_at, updated_at, available_at) "
        "SELECT 'r' || g, 't', 'th' || g, 'a', 'g', 'success', '{}', '{}', 'reject', now(), "
        "now(), now() FROM generate_series(1, $1) AS g",
        rows,
    )
    await conn.execute("SELECT pg_stat_force_next_flush()")


async def _analyze(url: str) -> list[str]:
    """One check of the keeper, as the server's would run it, on an engine of its own."""
    engine = create_engine(url, null_pool=True)
    try:
        return await analyze_grown_tables(engine, timeout_seconds=10)
    finally:
        await engine.dispose()


@asynccontextmanager
async def _served(url: str, **settings: Any) -> AsyncIterator[set[str]]:
    """The app serving `url` (no workers); yields the names of its background tasks."""
    app = create_app(Settings(database_url=url, workers=0, **settings))
    async with app.router.lifespan_context(app):
        yield {task.get_name() for task in app.state.graphkeep.background}


async def _cached_plan(conn: asyncpg.Connection) -> dict[str, Any]:
    text = await conn.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE lookup('r1', 't')")
    plan: dict[str, Any] = json.loads(text)[0]["Plan"]
    return plan


async def test_a_grown_table_is_analyzed_and_its_cached_plan_replanned(
    fresh_pg: str, raw: asyncpg.Connection
) -> None:
    await raw.execute(f"PREPARE lookup(varchar, varchar) AS {LOOKUP}")
    for _ in range(6):  # from the sixth execution on, PostgreSQL may keep a generic plan
        await raw.execute("EXECUTE lookup('r1', 't')")
    await _grow(raw, ROWS)

    before = await _cached_plan(raw)
    # The plan made on the empty table: run_id is not its index condition, so it reads every
    # run of the tenant (or every run) to find one.
    assert before.get("Index Name") != "pk_runs", before
    assert before.get("Rows Removed by Filter", 0) >= ROWS - 1, before

    analyzed = await _analyze(fresh_pg)
    assert {"runs", "threads"} <= set(analyzed), analyzed
    assert "assistants" not in analyzed  # unchanged since created

    after = await _cached_plan(raw)
    assert after["Index Name"] == "pk_runs", after
    assert after.get("Rows Removed by Filter", 0) == 0, after

    # analyzed: nothing grew since, nothing to do
    assert await _analyze(fresh_pg) == []


async def test_a_table_below_the_floor_is_left_to_autovacuum(
    fresh_pg: str, raw: asyncpg.Connection
) -> None:
    await _grow(raw, FLOOR_ROWS - 1)
    assert await _analyze(fresh_pg) == []


async def test_the_server_analyzes_a_grown_table_on_its_own(
    fresh_pg: str, raw: asyncpg.Connection
) -> None:
    async with _served(fresh_pg, planner_stats_interval_seconds=0.1):
        await _grow(raw, ROWS)
        deadline = time.monotonic() + 15
        analyzed = None
        while time.monotonic() < deadline and analyzed is None:
            await asyncio.sleep(0.1)
            analyzed = await raw.fetchval(
                "SELECT last_analyze FROM pg_stat_user_tables WHERE relname = 'runs'"
            )
    assert analyzed is not None, "the server did not analyze the grown runs table"


async def test_no_check_runs_when_the_interval_is_zero(
    fresh_pg: str, raw: asyncpg.Connection
) -> None:
    async with _served(fresh_pg, planner_stats_interval_seconds=0) as tasks:
        assert "gk-planner-stats" not in tasks
    async with _served(fresh_pg) as tasks:
        assert "gk-planner-stats" in tasks


async def test_a_role_that_may_not_analyze_a_table_leaves_it_alone(
    fresh_pg: str, raw: asyncpg.Connection
) -> None:
    """A serving role that is not the tables' owner (migrations ran as another): ANALYZE would
    only warn, on every check; the keeper does not try."""
    role = f"gk_reader_{uuid.uuid4().hex[:8]}"
    await raw.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        await raw.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
        await _grow(raw, ROWS)
        url = make_url(fresh_pg).set(username=role).render_as_string(hide_password=False)
        assert await _analyze(url) == []
        # the owner does analyze them: the check above is not vacuous
        assert {"runs", "threads"} <= set(await _analyze(fresh_pg))
    finally:
        await raw.execute(f'REVOKE ALL ON ALL TABLES IN SCHEMA public FROM "{role}"')
        await raw.execute(f'DROP ROLE "{role}"')


async def test_a_check_that_fails_is_logged_and_retried(caplog: pytest.LogCaptureFixture) -> None:
    """The database unreachable: every check fails, each is logged (the error's kind only) and
    the keeper keeps going rather than ending."""
    url = f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/nothing_listens"
    engine = create_engine(url, null_pool=True)
    keeper = asyncio.ensure_future(
        keep_planner_stats(engine, interval_seconds=0.05, timeout_seconds=2)
    )
    try:
        with caplog.at_level(logging.INFO, logger="app.ops.planner_stats"):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and len(_failures(caplog)) < 3:
                await asyncio.sleep(0.05)
        failures = _failures(caplog)
        assert len(failures) >= 3, caplog.text
        assert not keeper.done()
        assert all(record.error for record in failures)  # type: ignore[attr-defined]
        assert "nothing_listens" not in caplog.text  # no connection details in the log
    finally:
        keeper.cancel()
        await asyncio.gather(keeper, return_exceptions=True)
        await engine.dispose()


def _failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == "planner statistics not checked"]
