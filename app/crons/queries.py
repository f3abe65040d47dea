"""SQL of the crons domain. Every statement but the scheduler's claim takes the tenant."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    ColumnElement,
    Select,
    Table,
    bindparam,
    cast,
    column,
    delete,
    func,
    select,
    true,
    type_coerce,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.dml import Insert
from sqlalchemy.types import JSON, DateTime, Integer

from app.crons.schemas import CRON_SORT_COLUMNS
from app.db.dialect import json_contains, lock_for_claim
from app.db.listing import order_by
from app.db.sealed import SealedJSON, seal_json
from app.db.tables import assistants, crons, runs, threads
from app.db.types import JSONType, UTCDateTime

C = crons.c
JSONObject = dict[str, Any]


async def insert_cron(conn: AsyncConnection, values: JSONObject) -> Row[Any]:
    row: Row[Any] = (await conn.execute(crons.insert().values(**values).returning(crons))).one()
    return row


async def find_cron(
    conn: AsyncConnection, *, tenant_id: str, cron_id: str, for_update: bool = False
) -> Row[Any] | None:
    stmt = select(crons).where(C.cron_id == cron_id, C.tenant_id == tenant_id)
    if for_update:
        stmt = stmt.with_for_update()
    return (await conn.execute(stmt)).first()


async def update_cron(
    conn: AsyncConnection, *, tenant_id: str, cron_id: str, values: JSONObject
) -> Row[Any] | None:
    stmt = (
        update(crons)
        .where(C.cron_id == cron_id, C.tenant_id == tenant_id)
        .values(**values)
        .returning(crons)
    )
    row: Row[Any] | None = (await conn.execute(stmt)).first()
    return row


async def delete_cron(conn: AsyncConnection, *, tenant_id: str, cron_id: str) -> int:
    stmt = delete(crons).where(C.cron_id == cron_id, C.tenant_id == tenant_id)
    return (await conn.execute(stmt)).rowcount


async def thread_exists(conn: AsyncConnection, *, tenant_id: str, thread_id: str) -> bool:
    stmt = select(threads.c.thread_id).where(
        threads.c.thread_id == thread_id, threads.c.tenant_id == tenant_id
    )
    return (await conn.execute(stmt)).first() is not None


def filtered(
    dialect: str,
    *,
    tenant_id: str,
    assistant_id: str | None,
    thread_id: str | None,
    enabled: bool | None,
    metadata: JSONObject | None,
) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = [C.tenant_id == tenant_id]
    if assistant_id is not None:
        where.append(C.assistant_id == assistant_id)
    if thread_id is not None:
        where.append(C.thread_id == thread_id)
    if enabled is not None:
        where.append(C.enabled == enabled)
    if metadata:
        where.append(json_contains(dialect, C.metadata, metadata))
    return where


def search_statement(
    where: list[ColumnElement[bool]],
    *,
    sort_by: str | None,
    sort_order: str | None,
    limit: int,
    offset: int,
) -> Select[Any]:
    columns = {name: C[name] for name in CRON_SORT_COLUMNS}
    return (
        select(crons)
        .where(*where)
        .order_by(*order_by(columns, sort_by, sort_order, tie_breaker=C.cron_id))
        .limit(limit + 1)  # one more than asked: tells whether a next page exists
        .offset(offset)
    )


def count_statement(where: list[ColumnElement[bool]]) -> Select[Any]:
    return select(func.count()).select_from(crons).where(*where)


# --------------------------------------------------------------------------- scheduler


def due_predicate(now: datetime) -> ColumnElement[bool]:
    """Enabled crons due by `now`: one range of ix_crons_enabled_next_run_date."""
    return (C.enabled.is_(True)) & (C.next_run_date <= now)


def claim_due(dialect: str, *, now: datetime, limit: int) -> Select[Any]:
    """Due crons, oldest due first, locked for this transaction (SKIP LOCKED on PostgreSQL:
    another scheduler takes other rows, never these). `payload` comes back as stored (still
    sealed): it is opened per row (app/crons/firing.py), so one that does not decrypt fails
    alone instead of failing the whole batch's fetch."""
    columns = [type_coerce(c, JSONType).label(c.name) if c.name == "payload" else c for c in C]
    stmt = select(*columns).where(due_predicate(now)).order_by(C.next_run_date).limit(limit)
    return lock_for_claim(dialect, stmt)


async def assistants_for(conn: AsyncConnection, assistant_ids: set[str]) -> dict[str, Row[Any]]:
    """The assistants a claimed batch names, in one read (the caller checks each cron's
    tenant against the row's: its own or the shared system assistants)."""
    if not assistant_ids:
        return {}
    stmt = select(assistants).where(assistants.c.assistant_id.in_(sorted(assistant_ids)))
    return {row.assistant_id: row for row in (await conn.execute(stmt)).all()}


async def insert_fired(conn: AsyncConnection, fired: list[Any]) -> None:
    """The threads, then the runs, of stateless firings: one insert each. On PostgreSQL the
    rows travel as ONE JSON array parameter expanded by the server (`INSERT ... SELECT FROM
    jsonb_array_elements`): SQLAlchemy's per-row, per-column bind processing and a JSON
    encoding per value were most of a tick's time (one encoding of the array instead)."""
    if conn.dialect.name != "postgresql":
        await conn.execute(threads.insert(), [one.thread_row for one in fired])
        await conn.execute(runs.insert(), [one.run_row for one in fired])
        return
    for table, rows in (
        (threads, [one.thread_row for one in fired]),
        (runs, [one.run_row for one in fired]),
    ):
        stmt, sealed = _insert_from_json(table, tuple(rows[0]))
        await conn.execute(stmt, {"b_rows": [_as_json(row, sealed) for row in rows]})


def _elements(name: str) -> Any:
    """`jsonb_array_elements(:name) AS e(value)`: one row per element of a JSON array."""
    return (
        func.jsonb_array_elements(bindparam(name, type_=JSONB))
        .table_valued(column("value", JSONB))
        .alias("e")
    )


def _from_json(value: Any, target: Any) -> Any:
    """Element `value` of a JSON object as a value of column type `target`."""
    if isinstance(target, JSON | SealedJSON):
        return value  # jsonb as is (a JSON null stays JSON null, as the column type binds it)
    text = value.astext
    if isinstance(target, UTCDateTime | DateTime):
        return cast(text, DateTime(timezone=True))
    if isinstance(target, Boolean):
        return cast(text, Boolean)
    if isinstance(target, Integer):
        return cast(text, Integer)
    return text


_INSERTS: dict[tuple[str, tuple[str, ...]], tuple[Insert, frozenset[str]]] = {}


def _insert_from_json(table: Table, names: tuple[str, ...]) -> tuple[Insert, frozenset[str]]:
    """INSERT INTO table (names) SELECT ... FROM jsonb_array_elements(:b_rows), built once
    per column set; with the names of its sealed columns (sealed before encoding)."""
    key = (table.name, names)
    found = _INSERTS.get(key)
    if found is None:
        element = _elements("b_rows").c.value
        picked = [_from_json(element[name], table.c[name].type) for name in names]
        sealed = frozenset(n for n in names if isinstance(table.c[n].type, SealedJSON))
        found = _INSERTS[key] = (table.insert().from_select(list(names), select(*picked)), sealed)
    return found


def _as_json(row: JSONObject, sealed: frozenset[str]) -> JSONObject:
    """A row as its JSON element: datetimes as ISO text, sealed columns as stored."""
    return {
        name: (
            value.isoformat()
            if isinstance(value, datetime)
            else seal_json(value)
            if name in sealed
            else value
        )
        for name, value in row.items()
    }


def count_due(now: datetime) -> Select[Any]:
    return select(func.count()).select_from(crons).where(due_predicate(now))


def next_due(now: datetime) -> Select[Any]:
    """The earliest future due time (the scheduler sleeps until then, or its poll interval)."""
    return select(func.min(C.next_run_date)).where(C.enabled.is_(True), C.next_run_date > now)


_ADVANCE = (
    update(crons)
    .where(C.cron_id == bindparam("b_cron_id"))
    .values(
        next_run_date=bindparam("b_next_run_date"),
        status=bindparam("b_status"),
        enabled=bindparam("b_enabled"),
        last_error=bindparam("b_last_error"),
        updated_at=bindparam("b_now"),
    )
)


async def advance_many(conn: AsyncConnection, moves: list[JSONObject], *, now: datetime) -> None:
    """Move claimed crons on (in the claim's transaction, rows locked by it). Each move:
    b_cron_id, b_next_run_date, b_status, b_enabled, b_last_error. PostgreSQL: one UPDATE ...
    FROM the moves as one JSON array (an executemany is one statement per row); SQLite: an
    executemany."""
    if conn.dialect.name != "postgresql":
        await conn.execute(_ADVANCE, [{**move, "b_now": now} for move in moves])
        return
    rows = [{**move, "b_next_run_date": _iso(move["b_next_run_date"])} for move in moves]
    await conn.execute(_ADVANCE_FROM_JSON, {"b_moves": rows, "b_now": now})


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


_MOVE = _elements("b_moves").c.value
_ADVANCE_FROM_JSON = (
    update(crons)
    .where(C.cron_id == _MOVE["b_cron_id"].astext)
    .values(
        next_run_date=cast(_MOVE["b_next_run_date"].astext, DateTime(timezone=True)),
        status=_MOVE["b_status"].astext,
        enabled=cast(_MOVE["b_enabled"].astext, Boolean),
        last_error=_MOVE["b_last_error"].astext,
        updated_at=bindparam("b_now", type_=UTCDateTime),
    )
)


def visibility_statement(
    dialect: str, *, tenant_id: str, cron_id: str, auth_filter: JSONObject | None
) -> Select[Any]:
    """One row when the tenant has the cron: whether a custom-auth filter (a containment
    object on metadata) admits it. No row: no such cron."""
    admitted = json_contains(dialect, C.metadata, auth_filter) if auth_filter else true()
    return select(admitted.label("visible")).where(C.tenant_id == tenant_id, C.cron_id == cron_id)
