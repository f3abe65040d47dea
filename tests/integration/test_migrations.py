"""Migrations: upgrade, downgrade to base, upgrade again; the schema matches the code."""

from __future__ import annotations

from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.engine import Connection

from app.db import migrate
from app.db.engine import create_engine
from app.db.tables import metadata
from tests.conftest import create_pg_database, drop_pg_database


def _diff(conn: Connection) -> list[Any]:
    def on_this_dialect(obj: Any, name: Any, type_: str, reflected: bool, other: Any) -> bool:
        # an index declared for some dialects only (`info["dialects"]`, with its `ddl_if`)
        dialects = getattr(obj, "info", {}).get("dialects")
        return dialects is None or conn.dialect.name in dialects

    opts = {"compare_type": True, "include_object": on_this_dialect}
    ctx = MigrationContext.configure(conn, opts=opts)
    return list(compare_metadata(ctx, metadata))


def _tables(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names()) - {"alembic_version"}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'm.db'}"
        return
    if request.config.getoption("-m") == "not postgres":  # pragma: no cover
        pytest.skip("postgres deselected")
    request.getfixturevalue("pg_url")  # fails the run when PostgreSQL is down
    url = create_pg_database("gk_migr")
    yield url
    drop_pg_database(url)


async def test_upgrade_downgrade_upgrade_and_no_drift(fresh_url: str) -> None:
    engine = create_engine(fresh_url, null_pool=True)
    try:
        await migrate.upgrade(engine)
        assert await migrate.is_at_head(engine)
        await migrate.upgrade(engine)  # idempotent
        async with engine.connect() as conn:
            assert await conn.run_sync(_tables) == set(metadata.tables)
            assert await conn.run_sync(_diff) == []

        await migrate.downgrade(engine, "base")
        assert await migrate.current_revision(engine) is None
        async with engine.connect() as conn:
            assert await conn.run_sync(_tables) == set()

        await migrate.upgrade(engine)
        assert await migrate.current_revision(engine) == migrate.head_revision()
        async with engine.connect() as conn:
            assert await conn.run_sync(_diff) == []
    finally:
        await engine.dispose()
