"""/ok and /ready: liveness, and readiness that checks the database and the schema revision."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app.api.errors import is_database_unavailable
from app.config import Settings
from app.db.engine import create_engine
from app.main import create_app
from app.ops.health import check_readiness
from tests.conftest import migrated_pg_database


@pytest.fixture
def private_db_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A database of this test's own (its schema revision gets tampered with)."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('ready') / 'gk.db'}"
        return
    with migrated_pg_database("gk_ready") as url:
        yield url


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(database_url=db_url))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            yield c


async def test_ok_and_ready(client: httpx.AsyncClient) -> None:
    assert (await client.get("/ok")).json() == {"ok": True}
    r = await client.get("/ready")
    assert r.status_code == 200
    assert r.json() == {"ready": True, "database": True, "schema_at_head": True}


@pytest.mark.parametrize(
    "private_db_url",
    ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True,
)
async def test_ready_is_503_when_the_schema_is_not_at_head(private_db_url: str) -> None:
    app = create_app(Settings(database_url=private_db_url))
    async with app.router.lifespan_context(app):
        engine = app.state.graphkeep.engine
        async with engine.begin() as conn:
            await conn.execute(text("UPDATE alembic_version SET version_num = 'an_old_revision'"))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            r = await c.get("/ready")
            assert (await c.get("/ok")).status_code == 200  # alive all the same
    assert r.status_code == 503
    assert r.headers["retry-after"]
    body = r.json()
    assert body["ready"] is False and body["database"] is True
    assert body["schema_at_head"] is False
    assert "graphkeep migrate" in body["detail"]


async def test_ready_reports_a_refused_database() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: connecting is refused
    engine = create_engine(f"postgresql+asyncpg://postgres@127.0.0.1:{port}/x", timeout_seconds=2)
    try:
        result = await check_readiness(engine, timeout_seconds=2)
    finally:
        await engine.dispose()
    assert (result.ready, result.database) == (False, False)
    assert result.detail == "database unreachable"


async def test_ready_does_not_hang_on_a_silent_database() -> None:
    """A server that accepts TCP but never answers (a black-holed database) is 'not ready'
    within the timeout, not a hung probe."""
    accepted: list[asyncio.StreamWriter] = []

    async def swallow(_r: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    engine = create_engine(f"postgresql+asyncpg://postgres@127.0.0.1:{port}/x", timeout_seconds=30)
    started = time.monotonic()
    try:
        result = await check_readiness(engine, timeout_seconds=1)
    finally:
        await engine.dispose()
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()
    assert time.monotonic() - started < 5
    assert (result.ready, result.database) == (False, False)
    assert result.detail is not None and "within 1s" in result.detail


class _DriverError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(f"sqlstate {sqlstate}")
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    ("sqlstate", "unavailable"),
    [
        ("57P03", True),  # the database system is starting up (crash recovery)
        ("57P01", True),  # admin shutdown
        ("08006", True),  # connection failure
        ("53300", True),  # too many connections
        ("23505", False),  # unique violation: a bug or a conflict, not an outage
        ("42P01", False),  # undefined table
    ],
)
def test_database_errors_are_classified_by_sqlstate(sqlstate: str, unavailable: bool) -> None:
    exc = DBAPIError("SELECT 1", None, _DriverError(sqlstate))
    assert is_database_unavailable(exc) is unavailable
