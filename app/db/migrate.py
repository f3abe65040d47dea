"""Run Alembic migrations and check whether a database is at head."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.access import transaction

_PACKAGE = Path(__file__).resolve().parent.parent


def _script_locations() -> tuple[tuple[Path, Path], ...]:
    """(ini, scripts) candidates, the packaged copy first.

    A wheel (and so an sdist install and the container) carries the migrations inside the
    package as app/_alembic (pyproject.toml force-includes them). An editable install or a
    plain checkout has them beside the package as alembic/. There, `<parent>/alembic` of an
    installed package is site-packages/alembic: the Alembic *library*, which has no env.py,
    so a candidate counts only when it has the env.py and versions/ of a migration folder.
    """
    return (
        (_PACKAGE / "_alembic.ini", _PACKAGE / "_alembic"),
        (_PACKAGE.parent / "alembic.ini", _PACKAGE.parent / "alembic"),
    )


def _is_migration_folder(path: Path) -> bool:
    return (path / "env.py").is_file() and (path / "versions").is_dir()


def alembic_config() -> Config:
    """The Alembic config, from the installed package or from a source checkout."""
    for ini, script in _script_locations():
        if _is_migration_folder(script):
            cfg = Config(str(ini)) if ini.is_file() else Config()
            cfg.set_main_option("script_location", str(script))
            return cfg
    raise RuntimeError(f"graphkeep's migrations are missing: no app/_alembic in {_PACKAGE}")


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def _upgrade(connection: Connection, revision: str) -> None:
    cfg = alembic_config()
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, revision)


def _downgrade(connection: Connection, revision: str) -> None:
    cfg = alembic_config()
    cfg.attributes["connection"] = connection
    command.downgrade(cfg, revision)


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Upgrade to `revision` (head by default). Idempotent."""
    async with transaction(engine) as conn:
        await conn.run_sync(_upgrade, revision)


async def downgrade(engine: AsyncEngine, revision: str = "base") -> None:
    async with transaction(engine) as conn:
        await conn.run_sync(_downgrade, revision)


async def current_revision(engine: AsyncEngine) -> str | None:
    async with engine.connect() as conn:
        return await conn.run_sync(_current)


async def is_at_head(engine: AsyncEngine) -> bool:
    return await current_revision(engine) == head_revision()
