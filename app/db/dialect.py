"""The only place that branches on the database dialect."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.dml import Insert


def insert_for(dialect: Dialect | str, table: Table) -> Any:
    """A dialect `insert()` that supports `on_conflict_do_update` / `do_nothing`."""
    name = dialect if isinstance(dialect, str) else dialect.name
    if name == "postgresql":
        return postgresql.insert(table)
    if name == "sqlite":
        return sqlite.insert(table)
    raise ValueError(f"unsupported database dialect {name!r}")


def upsert(
    dialect: Dialect | str,
    table: Table,
    rows: list[dict[str, Any]] | dict[str, Any],
    *,
    keys: list[str],
    update: list[str] | None = None,
) -> Insert:
    """INSERT ... ON CONFLICT (keys) DO UPDATE SET update (or DO NOTHING when update is empty)."""
    stmt = insert_for(dialect, table).values(rows)
    if not update:
        return stmt.on_conflict_do_nothing(index_elements=keys)  # type: ignore[no-any-return]
    return stmt.on_conflict_do_update(  # type: ignore[no-any-return]
        index_elements=keys, set_={name: stmt.excluded[name] for name in update}
    )
