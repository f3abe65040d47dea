"""The only place that branches on the database dialect."""

from __future__ import annotations

import json
import weakref
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Float,
    Select,
    Table,
    Text,
    and_,
    bindparam,
    case,
    cast,
    exists,
    false,
    func,
    literal,
    or_,
    select,
    type_coerce,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.dml import Insert

from app.db.engine import AUTOCOMMIT_ENGINE, SQLITE_NO_BEGIN


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


def autocommit_read_options(dialect: Dialect | str) -> dict[str, Any]:
    """Execution options for connections that run independent single statements (reads, and
    on PostgreSQL single-statement writes): no BEGIN/COMMIT round trips, no SQLite write lock.

    PostgreSQL: AUTOCOMMIT. SQLite: skip the engine's BEGIN IMMEDIATE (SQLAlchemy's AUTOCOMMIT
    there would reset the driver's isolation setting when the connection is returned).
    """
    if _name(dialect) == "postgresql":
        return {"isolation_level": "AUTOCOMMIT"}
    return {SQLITE_NO_BEGIN: True}


def autocommits(engine: AsyncEngine) -> bool:
    """Whether `engine`'s connections are in autocommit unless told otherwise (the serving
    engine on PostgreSQL: `app.db.engine.create_engine(autocommit=True)`)."""
    return bool(engine.get_execution_options().get(AUTOCOMMIT_ENGINE))


_READERS: weakref.WeakKeyDictionary[AsyncEngine, AsyncEngine] = weakref.WeakKeyDictionary()


def bytes_hex(dialect: str, expr: ColumnElement[Any]) -> ColumnElement[str]:
    """Lowercase hex text of a binary expression (PostgreSQL: encode; SQLite: hex)."""
    if dialect == "postgresql":
        return func.encode(expr, "hex")
    return func.lower(func.hex(expr))


def reader(engine: AsyncEngine) -> AsyncEngine:
    """`engine` for single-statement reads and writes: on PostgreSQL autocommit (no BEGIN /
    ROLLBACK round trips around one SELECT), on SQLite no BEGIN IMMEDIATE write lock.
    Cached: building the option engine costs about as much as a small query's Python side."""
    if autocommits(engine):
        return engine  # already so (an option engine would only add its listener's cost)
    found = _READERS.get(engine)
    if found is None:
        found = _READERS[engine] = engine.execution_options(
            **autocommit_read_options(engine.dialect)
        )
    return found


def _name(dialect: Dialect | str) -> str:
    return dialect if isinstance(dialect, str) else dialect.name


def unnest_arrays(dialect: Dialect | str, prefix: str, columns: dict[str, Any]) -> Any:
    """PostgreSQL: rows from parallel array parameters, `unnest(:<prefix><col>, ...)`, with
    output columns named `columns`. One statement shape then inserts any number of rows, so
    it stays in SQLAlchemy's compiled cache and asyncpg's prepared statements (a multi-row
    VALUES of bound parameters is recompiled on every call). Not available on SQLite."""
    if _name(dialect) != "postgresql":
        raise ValueError("unnest_arrays is PostgreSQL only")
    arrays = [
        bindparam(f"{prefix}{name}", type_=postgresql.ARRAY(type_))
        for name, type_ in columns.items()
    ]
    return func.unnest(*arrays).table_valued(*columns).render_derived()


def bound_rows(dialect: Dialect | str, prefix: str, columns: dict[str, Any]) -> Any:
    """Rows of any number from one parameter set, as a FROM item whose columns are named
    `columns`, in ONE statement shape (compiled and prepared once): `unnest_arrays` on
    PostgreSQL; on SQLite `json_each` over one JSON array of row arrays, `:<prefix>rows`.
    `bound_rows_params` builds the parameters."""
    if _name(dialect) == "postgresql":
        return unnest_arrays(dialect, prefix, columns)
    each = func.json_each(bindparam(f"{prefix}rows", type_=Text)).table_valued("value")
    return (
        select(
            *(
                type_coerce(func.json_extract(each.c.value, f"$[{i}]"), type_).label(name)
                for i, (name, type_) in enumerate(columns.items())
            )
        )
        .select_from(each)
        .subquery()
    )


def bound_rows_params(
    dialect: Dialect | str, prefix: str, columns: list[str], rows: list[tuple[Any, ...]]
) -> dict[str, Any]:
    """The parameters of `bound_rows` for `rows` (tuples in the order of `columns`; values
    JSON-able scalars)."""
    if _name(dialect) == "postgresql":
        return {f"{prefix}{name}": [row[i] for row in rows] for i, name in enumerate(columns)}
    return {f"{prefix}rows": json.dumps(rows, separators=(",", ":"))}


def json_pairs(dialect: Dialect | str, column: ColumnElement[Any]) -> Any:
    """A JSON object column as rows (`key`, `value` text) to join against, in FROM:
    `jsonb_each_text` on PostgreSQL, `json_each` on SQLite (both may reference an earlier
    FROM item, so `FROM head, json_pairs(head.col)` works on both)."""
    if _name(dialect) == "postgresql":
        return func.jsonb_each_text(column).table_valued("key", "value")
    return func.json_each(column).table_valued("key", "value")


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


def one_of(expr: ColumnElement[Any], values: Sequence[str]) -> ColumnElement[bool]:
    """`expr IN (values)` spelt as equalities, each value an ordinary bind (no values: false).
    A plain `expr.in_(values)` is an "expanding" parameter that SQLAlchemy renders into the SQL
    again on every execution, even of a statement from its cache: use this in any statement
    that is built once and run many times (tests/unit/test_cached_statements.py)."""
    conds = [expr == value for value in values]
    if not conds:
        return false()
    return conds[0] if len(conds) == 1 else or_(*conds)


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
        conds_obj: list[Any] = [one_of(func.json_type(column, path), ["object"])]
        for key, sub in value.items():
            escaped = str(key).replace("\\", "\\\\").replace('"', '\\"')
            conds_obj.append(_sqlite_contains(column, f'{path}."{escaped}"', sub))
        return and_(*conds_obj)
    if isinstance(value, list):
        conds: list[Any] = [one_of(func.json_type(column, path), ["array"])]
        for element in value:
            each = func.json_each(column, path).table_valued("value", "type")
            if isinstance(element, dict | list):
                # Nested containers inside a list compare as exact JSON.
                match = each.c.value == func.json(json.dumps(element, separators=(",", ":")))
            else:
                match = and_(
                    one_of(each.c.type, _sqlite_json_type(element)),
                    each.c.value == _sqlite_scalar(element),
                )
            conds.append(exists(select(literal(1)).select_from(each).where(match)))
        return and_(*conds)
    cond = one_of(func.json_type(column, path), _sqlite_json_type(value))
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


# --------------------------------------------------------------------------- JSON paths
# Store filters address a JSON value by a path of object keys (str) and list positions (int).
# Keys must not contain '"' (SQLite path syntax); the Store validates that before calling.
# Every condition below is NULL or false when the path is missing.

JsonPath = tuple[str | int, ...]
JSON_KINDS = ("object", "array", "string", "number", "boolean", "null")
_SQLITE_KINDS = {
    "object": ("object",),
    "array": ("array",),
    "string": ("text",),
    "number": ("integer", "real"),
    "boolean": ("true", "false"),
    "null": ("null",),
}


def _dialect_name(dialect: Dialect | str) -> str:
    name = dialect if isinstance(dialect, str) else dialect.name
    if name not in ("postgresql", "sqlite"):
        raise ValueError(f"unsupported database dialect {name!r}")
    return name


def _sqlite_path(path: JsonPath) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f'."{p}"' for p in path)


def _pg_at(column: ColumnElement[Any], path: JsonPath) -> ColumnElement[Any]:
    return column.op("#>", return_type=postgresql.JSONB)(
        literal([str(p) for p in path], postgresql.ARRAY(Text))
    )


def json_kind_is(
    dialect: Dialect | str, column: ColumnElement[Any], path: JsonPath, kind: str
) -> ColumnElement[bool]:
    """The JSON at `path` is of `kind` (one of JSON_KINDS)."""
    if _dialect_name(dialect) == "postgresql":
        return func.jsonb_typeof(_pg_at(column, path)) == kind
    return one_of(func.json_type(column, _sqlite_path(path)), _SQLITE_KINDS[kind])


def json_missing(
    dialect: Dialect | str, column: ColumnElement[Any], path: JsonPath
) -> ColumnElement[bool]:
    """Nothing at `path` (a JSON null is something)."""
    if _dialect_name(dialect) == "postgresql":
        return _pg_at(column, path).is_(None)
    return func.json_type(column, _sqlite_path(path)).is_(None)


def json_number(
    dialect: Dialect | str, column: ColumnElement[Any], path: JsonPath
) -> ColumnElement[float]:
    """The number at `path` as a float, NULL when it is missing or not a number."""
    if _dialect_name(dialect) == "postgresql":
        text_at = column.op("#>>", return_type=Text)(
            literal([str(p) for p in path], postgresql.ARRAY(Text))
        )
        return case((json_kind_is(dialect, column, path, "number"), cast(text_at, Float)))
    return case(
        (
            json_kind_is(dialect, column, path, "number"),
            func.json_extract(column, _sqlite_path(path)),
        )
    )


def json_equals(
    dialect: Dialect | str, column: ColumnElement[Any], path: JsonPath, value: Any
) -> ColumnElement[bool]:
    """The JSON at `path` equals `value` exactly (JSON types: `1` is neither `true` nor `"1"`).

    Objects compare key by key whatever the key order, lists element-wise, numbers by value.
    """
    if _dialect_name(dialect) == "postgresql":
        return _pg_at(column, path) == type_coerce(value, postgresql.JSONB)
    return _sqlite_equals(column, path, value)


def json_scalar_equals(
    dialect: Dialect | str, column: ColumnElement[Any], path: JsonPath, kind: str, name: str
) -> ColumnElement[bool]:
    """The JSON at `path` is a number (kind "number") or string ("string") equal to the
    value bound later to the parameter `name` (so one statement serves every value)."""
    if _dialect_name(dialect) == "postgresql":
        return _pg_at(column, path) == bindparam(name, type_=postgresql.JSONB)
    where = _sqlite_path(path)
    return and_(
        one_of(func.json_type(column, where), _SQLITE_KINDS[kind]),
        func.json_extract(column, where) == bindparam(name),
    )


def _sqlite_equals(column: ColumnElement[Any], path: JsonPath, value: Any) -> ColumnElement[bool]:
    where = _sqlite_path(path)
    if isinstance(value, dict):
        size = select(func.count()).select_from(func.json_each(column, where)).scalar_subquery()
        return and_(
            func.json_type(column, where) == "object",
            size == len(value),
            *(_sqlite_equals(column, (*path, k), v) for k, v in value.items()),
        )
    if isinstance(value, list | tuple):
        return and_(
            func.json_type(column, where) == "array",
            func.json_array_length(column, where) == len(value),
            *(_sqlite_equals(column, (*path, i), v) for i, v in enumerate(value)),
        )
    if value is None:
        return func.json_type(column, where) == "null"
    if isinstance(value, bool):
        return func.json_type(column, where) == ("true" if value else "false")
    kind = "number" if isinstance(value, int | float) else "string"
    return and_(
        one_of(func.json_type(column, where), _SQLITE_KINDS[kind]),
        func.json_extract(column, where) == value,
    )


def json_array_length(
    dialect: Dialect | str, column: ColumnElement[Any], path: JsonPath
) -> ColumnElement[int]:
    """Length of the list at `path`; NULL when it is not a list (never an error)."""
    if _dialect_name(dialect) == "postgresql":
        return case(
            (
                json_kind_is(dialect, column, path, "array"),
                func.jsonb_array_length(_pg_at(column, path)),
            )
        )
    return case(
        (
            json_kind_is(dialect, column, path, "array"),
            func.json_array_length(column, _sqlite_path(path)),
        )
    )
