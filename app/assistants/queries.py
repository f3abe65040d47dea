"""SQL for assistants and their versions (pure statement builders plus small executors)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from app.assistants.schemas import (
    ASSISTANT_SORT_COLUMNS,
    Assistant,
    AssistantVersion,
    JSONObject,
)
from app.db.dialect import json_contains
from app.db.listing import order_by
from app.db.tables import SYSTEM_TENANT, assistant_versions, assistants

A = assistants.c
V = assistant_versions.c


def visible_to(tenant_id: str) -> ColumnElement[bool]:
    """Rows this tenant may read: its own plus the shared system assistants."""
    return or_(A.tenant_id == tenant_id, A.tenant_id == SYSTEM_TENANT)


def row_to_assistant(row: Row[Any]) -> Assistant:
    return Assistant(
        assistant_id=row.assistant_id,
        graph_id=row.graph_id,
        name=row.name,
        description=row.description,
        config=row.config or {},
        context=row.context or {},
        metadata=row.metadata or {},
        version=row.version,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def row_to_version(row: Row[Any]) -> AssistantVersion:
    return AssistantVersion(
        assistant_id=row.assistant_id,
        graph_id=row.graph_id,
        name=row.name,
        description=row.description,
        config=row.config or {},
        context=row.context or {},
        metadata=row.metadata or {},
        version=row.version,
        created_at=row.created_at,
    )


async def find_row(
    conn: AsyncConnection, *, tenant_id: str, assistant_id: str, for_update: bool = False
) -> Row[Any] | None:
    stmt = select(assistants).where(A.assistant_id == assistant_id, visible_to(tenant_id))
    if for_update:
        stmt = stmt.with_for_update()
    return (await conn.execute(stmt)).first()


async def insert_assistant(
    conn: AsyncConnection, *, tenant_id: str, values: JSONObject, now: datetime
) -> None:
    """Insert the assistant row and its version row (same content)."""
    await conn.execute(
        insert(assistants).values(tenant_id=tenant_id, created_at=now, updated_at=now, **values)
    )
    await insert_version(conn, tenant_id=tenant_id, values=values, now=now)


async def insert_version(
    conn: AsyncConnection, *, tenant_id: str, values: JSONObject, now: datetime
) -> None:
    await conn.execute(
        insert(assistant_versions).values(tenant_id=tenant_id, created_at=now, **values)
    )


async def update_assistant(
    conn: AsyncConnection, *, tenant_id: str, assistant_id: str, values: JSONObject
) -> None:
    await conn.execute(
        update(assistants)
        .where(A.assistant_id == assistant_id, A.tenant_id == tenant_id)
        .values(**values)
    )


async def max_version(conn: AsyncConnection, *, tenant_id: str, assistant_id: str) -> int:
    stmt = select(func.max(V.version)).where(
        V.assistant_id == assistant_id, V.tenant_id == tenant_id
    )
    return int((await conn.execute(stmt)).scalar_one() or 0)


async def find_version(
    conn: AsyncConnection, *, tenant_id: str, assistant_id: str, version: int
) -> Row[Any] | None:
    stmt = select(assistant_versions).where(
        V.assistant_id == assistant_id, V.tenant_id == tenant_id, V.version == version
    )
    return (await conn.execute(stmt)).first()


def versions_query(
    dialect: str, *, tenant_id: str, assistant_id: str, metadata: JSONObject | None
) -> Select[Any]:
    stmt = select(assistant_versions).where(
        V.assistant_id == assistant_id, or_(V.tenant_id == tenant_id, V.tenant_id == SYSTEM_TENANT)
    )
    if metadata:
        stmt = stmt.where(json_contains(dialect, V.metadata, metadata))
    return stmt.order_by(V.version.desc())


def search_statement(
    *,
    graph_ids: tuple[str, ...],
    count: bool,
    metadata: bool,
    graph_id: bool,
    name: bool,
    sort_by: str | None = None,
    sort_order: str | None = None,
) -> Select[Any]:
    """PostgreSQL: an assistant search (or count) of one filter shape, the server's graph ids
    written in, every value a bind parameter (tenant_id, metadata, graph_id, name_pattern - a
    LIKE pattern escaped with '/' -, limit, offset); the conditions of `filtered`."""
    stmt = select(func.count().label("n")).select_from(assistants) if count else select(assistants)
    stmt = stmt.where(
        or_(A.tenant_id == bindparam("tenant_id"), A.tenant_id == SYSTEM_TENANT),
        A.graph_id.in_(graph_ids),
    )
    if graph_id:
        stmt = stmt.where(A.graph_id == bindparam("graph_id"))
    if name:
        stmt = stmt.where(func.lower(A.name).like(bindparam("name_pattern"), escape="/"))
    if metadata:
        stmt = stmt.where(A.metadata.op("@>")(bindparam("metadata", type_=postgresql.JSONB)))
    if count:
        return stmt
    columns = {column: assistants.c[column] for column in ASSISTANT_SORT_COLUMNS}
    stmt = stmt.order_by(
        *order_by(
            columns,
            sort_by,
            sort_order,
            case_insensitive=("name", "graph_id"),
            tie_breaker=A.assistant_id,
        )
    )
    return stmt.limit(bindparam("limit")).offset(bindparam("offset"))


def contains_pattern(text: str) -> str:
    """A LIKE pattern matching `text` anywhere, its own % _ / escaped with '/'."""
    escaped = text.lower().replace("/", "//").replace("%", "/%").replace("_", "/_")
    return f"%{escaped}%"


def filtered(
    stmt: Select[Any],
    dialect: str,
    *,
    tenant_id: str,
    graph_ids: list[str],
    metadata: JSONObject | None,
    graph_id: str | None,
    name: str | None,
) -> Select[Any]:
    """Search filters; only assistants of graphs registered on this server are listed."""
    stmt = stmt.where(visible_to(tenant_id), A.graph_id.in_(graph_ids))
    if graph_id is not None:
        stmt = stmt.where(A.graph_id == graph_id)
    if name:
        stmt = stmt.where(func.lower(A.name).contains(name.lower(), autoescape=True))
    if metadata:
        stmt = stmt.where(json_contains(dialect, A.metadata, metadata))
    return stmt


async def delete_assistant(conn: AsyncConnection, *, tenant_id: str, assistant_id: str) -> int:
    # Versions go by ON DELETE CASCADE; deleted explicitly too, since a cascade is not
    # guaranteed when SQLite foreign keys are off on some connection.
    await conn.execute(
        delete(assistant_versions).where(V.assistant_id == assistant_id, V.tenant_id == tenant_id)
    )
    result = await conn.execute(
        delete(assistants).where(A.assistant_id == assistant_id, A.tenant_id == tenant_id)
    )
    return int(result.rowcount or 0)


def visibility_statement(
    dialect: str, *, tenant_id: str, assistant_id: str, auth_filter: JSONObject | None
) -> Select[Any]:
    """One row when the tenant may read the assistant: whether a custom-auth filter (a
    containment object on metadata) admits it. No row: no such assistant."""
    admitted = json_contains(dialect, A.metadata, auth_filter) if auth_filter else true()
    return select(admitted.label("visible")).where(
        visible_to(tenant_id), A.assistant_id == assistant_id
    )
