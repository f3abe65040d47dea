"""The only place that branches on the database dialect."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    Table,
    and_,
    exists,
    func,
    literal,
    select,
    type_coerce,
)
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


def lock_for_claim(dialect: Dialect | str, stmt: Select[Any]) -> Select[Any]:
    """The run-claim subselect, made safe for concurrent claimers.

    PostgreSQL: `FOR UPDATE SKIP LOCKED`, so concurrent workers take different rows. SQLite has
    no row locks (its compiler silently drops FOR UPDATE); the claim there is one atomic
    `UPDATE ... WHERE run_id = (subselect) RETURNING` under the database's single-writer lock.
    """
    name = dialect if isinstance(dialect, str) else dialect.name
    if name == "postgresql":
        return stmt.with_for_update(skip_locked=True)
    if name == "sqlite":
        return stmt
    raise ValueError(f"unsupported database dialect {name!r}")


def notify_channel_sql(dialect: Dialect | str) -> str | None:
    """SQL sending a cross-process notification (`:payload` bound), or None on SQLite.

    PostgreSQL NOTIFY is transactional: listeners hear it only when the transaction commits,
    which is exactly when the change it announces becomes visible.
    """
    name = dialect if isinstance(dialect, str) else dialect.name
    if name == "postgresql":
        return "SELECT pg_notify(:channel, :payload)"
    return None


def single_statement_autocommit(dialect: Dialect | str) -> bool:
    """Whether a write is best sent as one autocommitted statement.

    PostgreSQL runs data-modifying CTEs, so a checkpoint and its new blobs go in one statement,
    and one statement is atomic without BEGIN/COMMIT round trips. SQLite has no DML in CTEs
    and its writes need the engine's BEGIN IMMEDIATE, so there writes use a transaction.
    """
    return _name(dialect) == "postgresql"


def _name(dialect: Dialect | str) -> str:
    return dialect if isinstance(dialect, str) else dialect.name


def json_contains(dialect: Dialect | str, column: ColumnElement[Any], value: Any) -> Any:
    """`column @> value` (JSONB containment) on PostgreSQL; the same test spelt for SQLite.

    Objects match when every key of `value` is present with a containing value (recursively);
    a list matches when every element of `value` occurs in the stored list; scalars compare by
    JSON type and value, so `1` does not match `"1"` or `true`.
    """
    name = dialect if isinstance(dialect, str) else dialect.name
    if name == "postgresql":
        return column.op("@>")(type_coerce(value, postgresql.JSONB))
    if name == "sqlite":
        return _sqlite_contains(column, "$", value)
    raise ValueError(f"unsupported database dialect {name!r}")


def _sqlite_json_type(value: Any) -> list[str]:
    if value is None:
        return ["null"]
    if value is True:
        return ["true"]
    if value is False:
        return ["false"]
    if isinstance(value, int | float):
        return ["integer", "real"]
    if isinstance(value, str):
        return ["text"]
    if isinstance(value, list):
        return ["array"]
    return ["object"]


def _sqlite_contains(column: ColumnElement[Any], path: str, value: Any) -> Any:
    if isinstance(value, dict):
        conds_obj: list[Any] = [func.json_type(column, path).in_(["object"])]
        for key, sub in value.items():
            escaped = str(key).replace("\\", "\\\\").replace('"', '\\"')
            conds_obj.append(_sqlite_contains(column, f'{path}."{escaped}"', sub))
        return and_(*conds_obj)
    if isinstance(value, list):
        conds: list[Any] = [func.json_type(column, path).in_(["array"])]
        for element in value:
            each = func.json_each(column, path).table_valued("value", "type")
            if isinstance(element, dict | list):
                # Nested containers inside a list compare as exact JSON.
                match = each.c.value == func.json(json.dumps(element, separators=(",", ":")))
            else:
                match = and_(
                    each.c.type.in_(_sqlite_json_type(element)),
                    each.c.value == _sqlite_scalar(element),
                )
            conds.append(exists(select(literal(1)).select_from(each).where(match)))
        return and_(*conds)
    cond = func.json_type(column, path).in_(_sqlite_json_type(value))
    if value is None:
        return cond
    return and_(cond, func.json_extract(column, path) == _sqlite_scalar(value))


def _sqlite_scalar(value: Any) -> Any:
    # json_extract returns booleans as 1 / 0
    if value is True:
        return 1
    if value is False:
        return 0
    return value
