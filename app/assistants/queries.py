"""SQL for assistants and their versions: pure statement builders (no connection, no I/O);
app/assistants/service.py executes them.

Every builder takes (or binds) the caller's `tenant_id`; a tenant reads its own assistants
plus the shared system ones (`visible_to`). Statements whose shape never changes are built
once (module constants), so SQLAlchemy's compiled cache and asyncpg's prepared statements see
one object each; values then come as parameters.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BindParameter,
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
from sqlalchemy.sql.dml import Delete, Insert, Update

from app.assistants.schemas import (
    ASSISTANT_SORT_COLUMNS,
    Assistant,
    AssistantVersion,
    JSONObject,
)
from app.db.dialect import json_contains, one_of, upsert
from app.db.listing import order_by
from app.db.tables import SYSTEM_TENANT, assistant_versions, assistants, runs
from app.statuses import ACTIVE_RUN_STATUSES

A = assistants.c
V = assistant_versions.c


def visible_to(tenant_id: str | BindParameter[Any]) -> ColumnElement[bool]:
    """Rows this tenant may read: its own plus the shared system assistants (`tenant_id` a
    value, or a bound parameter in a statement built once)."""
    return or_(A.tenant_id == tenant_id, A.tenant_id == SYSTEM_TENANT)


def _version_fields(row: Row[Any]) -> dict[str, Any]:
    """The columns an assistant and each of its versions share."""
    m = row._mapping  # by key: a Row's attribute lookup costs about five times more
    return {
        "assistant_id": m["assistant_id"],
        "graph_id": m["graph_id"],
        "name": m["name"],
        "description": m["description"],
        "config": m["config"] or {},
        "context": m["context"] or {},
        "metadata": m["metadata"] or {},
        "version": m["version"],
        "created_at": m["created_at"],
    }


def row_to_assistant(row: Row[Any]) -> Assistant:
    return Assistant(**_version_fields(row), updated_at=row._mapping["updated_at"])


def row_to_version(row: Row[Any]) -> AssistantVersion:
    return AssistantVersion(**_version_fields(row))


# The assistant a tenant may read (binds `tenant_id`, `assistant_id`: `assistant_key`): the
# assistant get and the run create read it on every call, so it is built once.
ASSISTANT_ROW = select(assistants).where(
    A.assistant_id == bindparam("assistant_id"), visible_to(bindparam("tenant_id"))
)
# ... locked, for a change made from what it holds (patch, set_latest_version)
ASSISTANT_ROW_FOR_UPDATE = ASSISTANT_ROW.with_for_update()


def assistant_key(tenant_id: str, assistant_id: str) -> JSONObject:
    """The parameters of `ASSISTANT_ROW`."""
    return {"tenant_id": tenant_id, "assistant_id": assistant_id}


async def find_row(
    conn: AsyncConnection, *, tenant_id: str, assistant_id: str, for_update: bool = False
) -> Row[Any] | None:
    """The assistant row, or None. An executor, kept for the run engine's and the crons'
    create paths (app/runs/service.py); services here execute `ASSISTANT_ROW` themselves."""
    stmt = ASSISTANT_ROW_FOR_UPDATE if for_update else ASSISTANT_ROW
    return (await conn.execute(stmt, assistant_key(tenant_id, assistant_id))).first()


# New rows come as parameters (`assistant_row`, `version_row`), the statements built once.
INSERT_ASSISTANT = insert(assistants)
INSERT_VERSION = insert(assistant_versions)


def assistant_row(*, tenant_id: str, values: JSONObject, now: datetime) -> JSONObject:
    """`INSERT_ASSISTANT`'s parameters: a new assistant with `values`."""
    return {"tenant_id": tenant_id, "created_at": now, "updated_at": now, **values}


def version_row(*, tenant_id: str, values: JSONObject, now: datetime) -> JSONObject:
    """`INSERT_VERSION`'s parameters: a version with `values`."""
    return {"tenant_id": tenant_id, "created_at": now, **values}


def update_assistant(tenant_id: str, assistant_id: str, values: JSONObject) -> Update:
    """Set `values` (column -> value) on the tenant's own assistant."""
    return (
        update(assistants)
        .where(A.assistant_id == assistant_id, A.tenant_id == tenant_id)
        .values(**values)
    )


def max_version(tenant_id: str, assistant_id: str) -> Select[Any]:
    """The assistant's highest version number (NULL: none)."""
    return select(func.max(V.version)).where(
        V.assistant_id == assistant_id, V.tenant_id == tenant_id
    )


def find_version(tenant_id: str, assistant_id: str, version: int) -> Select[Any]:
    """One version of the tenant's own assistant."""
    return select(assistant_versions).where(
        V.assistant_id == assistant_id, V.tenant_id == tenant_id, V.version == version
    )


def active_run_ids(tenant_id: str, assistant_id: str) -> Select[Any]:
    """Pending or running runs of the assistant."""
    return select(runs.c.run_id).where(
        runs.c.tenant_id == tenant_id,
        runs.c.assistant_id == assistant_id,
        runs.c.status.in_(sorted(ACTIVE_RUN_STATUSES)),
    )


def upsert_system_assistant(
    dialect: str, row: JSONObject, *, changing: list[str]
) -> tuple[Insert, Insert]:
    """A system assistant (`row`: its full assistant row, tenant SYSTEM_TENANT) and its
    version 1: inserted, or their `changing` columns refreshed."""
    version = {k: v for k, v in row.items() if k != "updated_at"}
    return (
        upsert(dialect, assistants, row, keys=["assistant_id"], update=changing),
        upsert(
            dialect,
            assistant_versions,
            version,
            keys=["assistant_id", "version"],
            update=changing,
        ),
    )


def versions_query(
    dialect: str,
    *,
    tenant_id: str,
    assistant_id: str,
    metadata: JSONObject | None,
    limit: int,
    offset: int,
) -> Select[Any]:
    """A page of the assistant's versions (the tenant's or the system's), newest first."""
    stmt = select(assistant_versions).where(
        V.assistant_id == assistant_id, or_(V.tenant_id == tenant_id, V.tenant_id == SYSTEM_TENANT)
    )
    if metadata:
        stmt = stmt.where(json_contains(dialect, V.metadata, metadata))
    return stmt.order_by(V.version.desc()).limit(limit).offset(offset)


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
    carried by the statement itself (one statement per id set), every request value a bind
    parameter (tenant_id, metadata, graph_id, name_pattern - a LIKE pattern escaped with '/' -,
    limit, offset); the conditions of `filtered`."""
    stmt = select(func.count().label("n")).select_from(assistants) if count else select(assistants)
    stmt = stmt.where(
        or_(A.tenant_id == bindparam("tenant_id"), A.tenant_id == SYSTEM_TENANT),
        one_of(A.graph_id, graph_ids),
    )
    if graph_id:
        stmt = stmt.where(A.graph_id == bindparam("graph_id"))
    if name:
        stmt = stmt.where(func.lower(A.name).like(bindparam("name_pattern"), escape="/"))
    if metadata:
        stmt = stmt.where(A.metadata.op("@>")(bindparam("metadata", type_=postgresql.JSONB)))
    if count:
        return stmt
    return (
        sorted_search(stmt, sort_by, sort_order)
        .limit(bindparam("limit"))
        .offset(bindparam("offset"))
    )


def sorted_search(stmt: Select[Any], sort_by: str | None, sort_order: str | None) -> Select[Any]:
    """A search in the API's sort order (names case-insensitive, then the id as tie-breaker)."""
    columns = {column: assistants.c[column] for column in ASSISTANT_SORT_COLUMNS}
    return stmt.order_by(
        *order_by(
            columns,
            sort_by,
            sort_order,
            case_insensitive=("name", "graph_id"),
            tie_breaker=A.assistant_id,
        )
    )


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


def delete_assistant(tenant_id: str, assistant_id: str) -> list[Delete]:
    """Delete the tenant's own assistant and its versions, in order."""
    # Versions go by ON DELETE CASCADE; deleted explicitly too, since a cascade is not
    # guaranteed when SQLite foreign keys are off on some connection.
    return [
        delete(assistant_versions).where(V.assistant_id == assistant_id, V.tenant_id == tenant_id),
        delete(assistants).where(A.assistant_id == assistant_id, A.tenant_id == tenant_id),
    ]


def search_page(
    dialect: str,
    *,
    tenant_id: str,
    graph_ids: list[str],
    metadata: JSONObject | None,
    graph_id: str | None,
    name: str | None,
    sort_by: str | None,
    sort_order: str | None,
    limit: int,
    offset: int,
) -> Select[Any]:
    """A page of the portable search (values written into the statement)."""
    stmt = filtered(
        select(assistants),
        dialect,
        tenant_id=tenant_id,
        graph_ids=graph_ids,
        metadata=metadata,
        graph_id=graph_id,
        name=name,
    )
    return sorted_search(stmt, sort_by, sort_order).limit(limit).offset(offset)


def count_statement(
    dialect: str,
    *,
    tenant_id: str,
    graph_ids: list[str],
    metadata: JSONObject | None,
    graph_id: str | None,
    name: str | None,
) -> Select[Any]:
    """The portable count of a search's matches."""
    return filtered(
        select(func.count()).select_from(assistants),
        dialect,
        tenant_id=tenant_id,
        graph_ids=graph_ids,
        metadata=metadata,
        graph_id=graph_id,
        name=name,
    )


def visibility_statement(
    dialect: str, *, tenant_id: str, assistant_id: str, auth_filter: JSONObject | None
) -> Select[Any]:
    """One row when the tenant may read the assistant: whether a custom-auth filter (a
    containment object on metadata) admits it. No row: no such assistant."""
    admitted = json_contains(dialect, A.metadata, auth_filter) if auth_filter else true()
    return select(admitted.label("visible")).where(
        visible_to(tenant_id), A.assistant_id == assistant_id
    )
