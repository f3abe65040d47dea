"""Shared fixtures: real PostgreSQL and real SQLite, migrated once per session.

Each test session gets its own PostgreSQL database (created from the admin database and
dropped at the end), so parallel sessions never collide. An unreachable PostgreSQL fails the
run; set GRAPHKEEP_TEST_SKIP_POSTGRES=1 to run the SQLite half alone on purpose.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import migrate
from app.db.engine import create_engine
from app.db.tables import metadata

PG_ADMIN_URL = os.environ.get(
    "GRAPHKEEP_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
)
SKIP_POSTGRES = os.environ.get("GRAPHKEEP_TEST_SKIP_POSTGRES") == "1"


def _asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(_asyncpg_dsn(PG_ADMIN_URL), timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _migrate(url: str) -> None:
    engine = create_engine(url, null_pool=True)
    try:
        await migrate.upgrade(engine)
    finally:
        await engine.dispose()


def create_pg_database(prefix: str = "gk_test") -> str:
    """Create an empty PostgreSQL database and return its URL (not migrated)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    return make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)


def drop_pg_database(url: str) -> None:
    name = make_url(url).database
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@contextmanager
def migrated_pg_database(prefix: str) -> Iterator[str]:
    """A migrated PostgreSQL database of the caller's own, dropped afterwards."""
    url = create_pg_database(prefix)
    try:
        asyncio.run(_migrate(url))
        yield url
    finally:
        drop_pg_database(url)


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A migrated PostgreSQL database for this test session."""
    if SKIP_POSTGRES:
        pytest.skip("GRAPHKEEP_TEST_SKIP_POSTGRES=1")
    try:
        url = create_pg_database()
    except (OSError, asyncpg.PostgresError) as exc:  # pragma: no cover - environment
        pytest.fail(f"PostgreSQL at {make_url(PG_ADMIN_URL).host} is unreachable: {exc}")
    asyncio.run(_migrate(url))
    yield url
    drop_pg_database(url)


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A migrated SQLite file for this test session."""
    path: Path = tmp_path_factory.mktemp("sqlite") / "graphkeep.db"
    url = f"sqlite+aiosqlite:///{path}"
    asyncio.run(_migrate(url))
    return url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    """Both dialects: every test using it runs once on SQLite and once on PostgreSQL."""
    name = "pg_url" if request.param == "postgres" else "sqlite_url"
    return str(request.getfixturevalue(name))


async def terminate_backends(engine: AsyncEngine) -> int:
    """Kill every other connection to the engine's PostgreSQL database from outside its
    pools, as a server restart would; returns how many."""
    admin = create_engine(engine.url.render_as_string(hide_password=False), null_pool=True)
    try:
        async with admin.connect() as conn:
            killed = await conn.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
            return int(killed.scalar_one())
    finally:
        await admin.dispose()


async def truncate_all(engine: AsyncEngine) -> None:
    names = [t.name for t in reversed(metadata.sorted_tables)]
    for attempt in range(5):
        try:
            async with engine.begin() as conn:
                if conn.dialect.name == "postgresql":
                    await conn.execute(text(f"TRUNCATE {', '.join(names)} CASCADE"))
                else:
                    for name in names:
                        await conn.execute(text(f'DELETE FROM "{name}"'))
            return
        except DBAPIError as exc:
            # A run a test started may still be finishing its last write; TRUNCATE's table
            # locks can then deadlock with it. The write ends quickly: try again.
            if "deadlock" not in str(exc) or attempt == 4:
                raise
            await asyncio.sleep(0.2 * (attempt + 1))


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine on a clean, migrated database (tables emptied after each test)."""
    eng = create_engine(db_url)
    try:
        yield eng
    finally:
        await truncate_all(eng)
        await eng.dispose()


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist's --dist loadfile hands out modules in the order it is given, except that by
    # default it first re-sorts them by test count, most first ("loadscope reorder"). That puts
    # the few-test, long modules (outages, faults, the wheel install, the fuzzer) last, so one
    # worker spends the run's last minutes on them alone while the other is idle. Keep the order
    # pytest_collection_modifyitems below makes instead (slowest kinds first).
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def _module_rank(item: pytest.Item) -> int:
    """0 for modules marked slow, 1 for the other live-server (e2e) modules, 2 for the rest."""
    if item.get_closest_marker("slow") is not None:
        return 0
    if item.get_closest_marker("e2e") is not None or "/e2e/" in item.nodeid.replace("\\", "/"):
        return 1
    return 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest kinds of module first, each module's tests kept together and in their order, so
    the workers finish together (see pytest_configure). A stable sort on the module's rank: the
    order within a rank, and within a module, is pytest's."""
    rank: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        rank[module] = min(rank.get(module, 2), _module_rank(item))
    items.sort(key=lambda item: rank[item.nodeid.split("::", 1)[0]])
