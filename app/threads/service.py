"""Thread use cases (rows, search, copy, prune); state and history live in state.py.

Each function owns one transaction and is scoped by `tenant_id`. Checkpoints go through the
tenant's view of the saver (`saver.for_tenant`).
"""

from __future__ import annotations

import json
import re
import uuid
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine
from uuid_utils.compat import uuid7

from app.db import sealed
from app.db.access import read
from app.db.dialect import reader
from app.db.direct import DirectExecutor, DirectStatement, service_executor
from app.db.listing import check_select, check_sort_order, order_by
from app.db.tables import runs, threads
from app.db.types import utcnow
from app.errors import Conflict, InvalidInput, NotFound, ValidationFailed
from app.threads import queries as q
from app.threads.schemas import (
    THREAD_FIELDS,
    THREAD_SORT_COLUMNS,
    JSONObject,
    Thread,
    ThreadCount,
    ThreadCreate,
    ThreadPatch,
    ThreadPrune,
    ThreadSearch,
)


@dataclass(frozen=True)
class Page:
    """One page of a search, plus whether more rows exist (for the pagination headers)."""

    items: list[JSONObject]
    has_more: bool


def parse_thread_id(value: str) -> str:
    """Canonical lowercase UUID text, or 422."""
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        raise ValidationFailed(f"thread_id: {value!r} is not a valid UUID") from None


def new_thread_id() -> str:
    """UUIDv7: time-ordered, so sorting by id follows creation time (as the official server)."""
    return str(uuid7())


@dataclass(frozen=True)
class _Direct:
    """The hot thread statements, pre-compiled for an engine (app/db/direct.py)."""

    run: DirectExecutor
    metadata: DirectStatement
    row: DirectStatement
    patch_metadata: DirectStatement | None  # PostgreSQL only
    insert: DirectStatement
    # a new thread's JSON columns that never vary, encoded once by their own bind processor
    fresh_json: JSONObject


_NO_TTL: JSONObject = {"ttl_minutes": None, "ttl_strategy": None, "expires_at": None}
_FRESH_JSON: JSONObject = {"config": {}, "values": None, "interrupts": {}, "error": None}
_DIRECT: weakref.WeakKeyDictionary[AsyncEngine, _Direct] = weakref.WeakKeyDictionary()


def _direct(engine: AsyncEngine) -> _Direct:
    found = _DIRECT.get(engine)
    if found is None:
        run = service_executor(engine)
        dialect = engine.dialect
        fresh_json: JSONObject = {}
        for name, value in _FRESH_JSON.items():
            process = threads.c[name].type.dialect_impl(dialect).bind_processor(dialect)
            fresh_json[name] = process(value) if process is not None else value
        found = _DIRECT[engine] = _Direct(
            run,
            run.prepare(q.THREAD_METADATA),
            run.prepare(q.THREAD_ROW),
            run.prepare(q.PATCH_THREAD_METADATA_PG) if dialect.name == "postgresql" else None,
            run.prepare(q.INSERT_THREAD_ROW, raw=tuple(_FRESH_JSON)),
            fresh_json,
        )
    return found


async def find_thread(
    engine: AsyncEngine,
    *,
    tenant_id: str,
    thread_id: str,
    include_ttl: bool = False,
    auth_filter: JSONObject | None = None,
) -> Thread | None:
    """The thread (one pre-compiled lookup), or None (also for another tenant's thread, and
    one a custom-auth `auth_filter` does not admit: tested in the same statement)."""
    if auth_filter:
        # the hot read keeps its direct path (one pre-compiled statement), filter included
        direct = _direct(engine)
        statement = _filtered_row_statement(engine, direct, auth_filter)
        params = {"tenant_id": tenant_id, "thread_id": thread_id, "auth_filter": auth_filter}
        rows = await direct.run.fetch(statement, params)
        return q.row_to_thread(rows[0], include_ttl=include_ttl) if rows else None
    direct = _direct(engine)
    rows = await direct.run.fetch(direct.row, {"tenant_id": tenant_id, "thread_id": thread_id})
    return q.row_to_thread(rows[0], include_ttl=include_ttl) if rows else None


# SQLite spells containment per filter value, so its filtered lookup is compiled per filter
# (one per user for an owner filter); the most recent ones are kept, a bounded set.
FILTERED_STATEMENTS_KEPT = 1024
_FILTERED: weakref.WeakKeyDictionary[AsyncEngine, OrderedDict[str, DirectStatement]] = (
    weakref.WeakKeyDictionary()
)


def _filtered_row_statement(
    engine: AsyncEngine, direct: _Direct, auth_filter: JSONObject
) -> DirectStatement:
    if engine.dialect.name == "postgresql":  # the filter is one JSONB bind: one statement
        return direct.run.prepared(("threads.get.filtered",), q.filtered_thread_row_pg)
    kept = _FILTERED.setdefault(engine, OrderedDict())
    key = json.dumps(auth_filter, sort_keys=True)
    found = kept.get(key)
    if found is None:
        found = kept[key] = direct.run.prepare(q.filtered_thread_row_sqlite(auth_filter))
        if len(kept) > FILTERED_STATEMENTS_KEPT:
            kept.popitem(last=False)
    else:
        kept.move_to_end(key)
    return found


async def get_thread(
    engine: AsyncEngine,
    *,
    tenant_id: str,
    thread_id: str,
    include_ttl: bool = False,
    auth_filter: JSONObject | None = None,
) -> Thread:
    """The thread, or 404 (also for another tenant's thread, or one `auth_filter` hides)."""
    thread_id = parse_thread_id(thread_id)
    thread = await find_thread(
        engine,
        tenant_id=tenant_id,
        thread_id=thread_id,
        include_ttl=include_ttl,
        auth_filter=auth_filter,
    )
    if thread is None:
        raise NotFound(f"Thread '{thread_id}' not found")
    return thread


async def get_thread_metadata(
    engine: AsyncEngine, *, tenant_id: str, thread_id: str
) -> tuple[str, JSONObject]:
    """(canonical thread id, metadata) of the thread, or 404; reads nothing else of the row."""
    thread_id = parse_thread_id(thread_id)
    direct = _direct(engine)
    rows = await direct.run.fetch(direct.metadata, {"tenant_id": tenant_id, "thread_id": thread_id})
    if not rows:
        raise NotFound(f"Thread '{thread_id}' not found")
    return thread_id, dict(rows[0].metadata or {})


async def create_thread(engine: AsyncEngine, *, tenant_id: str, body: ThreadCreate) -> Thread:
    generated = not body.thread_id
    thread_id = parse_thread_id(body.thread_id) if body.thread_id else new_thread_id()
    now = utcnow()
    existing = None
    try:
        if generated:
            # A fresh UUIDv7 cannot exist yet: no lookup; the INSERT alone is the transaction
            # (one round trip on PostgreSQL), pre-compiled on the direct path.
            row = q.thread_row(
                tenant_id=tenant_id,
                thread_id=thread_id,
                metadata=dict(body.metadata or {}),
                now=now,
                extra=q.ttl_columns(body.ttl, now),
            )
            direct = _direct(engine)
            await direct.run.write((direct.insert, [{**_NO_TTL, **row, **direct.fresh_json}]))
        else:
            async with engine.begin() as conn:
                existing = await q.find_thread_row(conn, tenant_id=tenant_id, thread_id=thread_id)
                if existing is None:
                    await q.insert_thread(
                        conn,
                        tenant_id=tenant_id,
                        thread_id=thread_id,
                        metadata=dict(body.metadata or {}),
                        now=now,
                        extra=q.ttl_columns(body.ttl, now),
                    )
    except IntegrityError:
        # Taken concurrently, or by another tenant (which must not be revealed).
        raise Conflict(f"Thread '{thread_id}' already exists") from None
    if existing is not None:
        if body.if_exists == "do_nothing":
            return q.row_to_thread(existing)
        raise Conflict(f"Thread '{thread_id}' already exists")
    # Built from what was inserted: no second round trip to read it back.
    return Thread(
        thread_id=thread_id,
        created_at=now,
        updated_at=now,
        state_updated_at=now,
        metadata=dict(body.metadata or {}),
        config={},
        status="idle",
        values=None,
        interrupts={},
    )


async def patch_thread(
    engine: AsyncEngine, *, tenant_id: str, thread_id: str, body: ThreadPatch
) -> Thread:
    """Shallow-merge metadata; replace the TTL when given."""
    thread_id = parse_thread_id(thread_id)
    now = utcnow()
    direct = _direct(engine)
    if direct.patch_metadata is not None and body.ttl is None:
        # the common patch (metadata only) in one autocommitted statement
        rows = await direct.run.fetch(
            direct.patch_metadata,
            {
                "tenant_id": tenant_id,
                "thread_id": thread_id,
                "patch": dict(body.metadata or {}),
                "now": now,
            },
        )
        if not rows:
            raise NotFound(f"Thread '{thread_id}' not found")
        return q.row_to_thread(rows[0])
    async with engine.begin() as conn:
        row = await q.find_thread_row(conn, tenant_id=tenant_id, thread_id=thread_id)
        if row is None:
            raise NotFound(f"Thread '{thread_id}' not found")
        changes: JSONObject = {"updated_at": now, **q.ttl_columns(body.ttl, now)}
        if body.metadata:
            changes["metadata"] = {**(row.metadata or {}), **body.metadata}
        await q.update_thread_row(conn, tenant_id=tenant_id, thread_id=thread_id, values=changes)
    return await get_thread(engine, tenant_id=tenant_id, thread_id=thread_id)


async def delete_threads(
    engine: AsyncEngine, *, tenant_id: str, thread_ids: list[str], saver: Any
) -> int:
    """Delete threads, their runs, run events and checkpoints, in one transaction; unknown
    ids are skipped."""
    async with engine.begin() as conn:
        deleted = await q.delete_thread_rows(conn, tenant_id=tenant_id, thread_ids=thread_ids)
        if deleted:
            await saver.for_tenant(tenant_id).adelete_threads_in(conn, deleted)
    return len(deleted)


async def delete_thread(engine: AsyncEngine, *, tenant_id: str, thread_id: str, saver: Any) -> None:
    thread_id = parse_thread_id(thread_id)
    if not await delete_threads(engine, tenant_id=tenant_id, thread_ids=[thread_id], saver=saver):
        raise NotFound(f"Thread '{thread_id}' not found")


async def active_run_ids(engine: AsyncEngine, *, tenant_id: str, thread_id: str) -> list[str]:
    """Pending or running runs of the thread (to cancel them before a delete)."""
    async with reader(engine).connect() as conn:
        stmt = select(runs.c.run_id).where(
            runs.c.tenant_id == tenant_id,
            runs.c.thread_id == thread_id,
            runs.c.status.in_(("pending", "running")),
        )
        return list((await conn.execute(stmt)).scalars().all())


async def delete_threads_of_assistant(
    engine: AsyncEngine, *, tenant_id: str, assistant_id: str, saver: Any
) -> int:
    """Threads whose metadata.assistant_id is this assistant (DELETE ?delete_threads=true)."""
    async with reader(engine).connect() as conn:
        stmt = q.filtered(
            select(threads.c.thread_id),
            conn.dialect.name,
            tenant_id=tenant_id,
            metadata={"assistant_id": assistant_id},
        )
        ids = list((await conn.execute(stmt)).scalars().all())
    return await delete_threads(engine, tenant_id=tenant_id, thread_ids=ids, saver=saver)


# `extract` on thread search (as the official server): at most this many aliases, each a
# plain identifier not shadowing a thread field, each path rooted in one of these columns.
MAX_EXTRACT_PATHS = 10
EXTRACTABLE_COLUMNS = ("values", "metadata", "config", "interrupts")
_ALIAS = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PATH_SPLIT = re.compile(r"\.|\[")


def check_extract(extract: dict[str, str] | None) -> dict[str, str] | None:
    """Validate `extract` ({alias: "values.messages[-1].content"}); 422 saying what is wrong."""
    if not extract:
        return None
    if len(extract) > MAX_EXTRACT_PATHS:
        raise ValidationFailed(
            f"extract: at most {MAX_EXTRACT_PATHS} paths are allowed, got {len(extract)}"
        )
    for alias, path in extract.items():
        if alias in THREAD_FIELDS:
            raise ValidationFailed(f"extract: alias {alias!r} is a thread field name")
        if not _ALIAS.match(alias):
            raise ValidationFailed(
                f"extract: alias {alias!r} must be an identifier (letters, digits, underscores)"
            )
        root = _PATH_SPLIT.split(path, maxsplit=1)[0]
        if root not in EXTRACTABLE_COLUMNS:
            raise ValidationFailed(
                f"extract: path {path!r} must start with one of {', '.join(EXTRACTABLE_COLUMNS)}"
            )
    return dict(extract)


def extract_path(thread: JSONObject, path: str) -> Any:
    """The value at `path` (`column.key[index].key`, negative indexes allowed) in a thread's
    JSON, or None where the path does not resolve."""
    parts = _PATH_SPLIT.split(path)
    current: Any = thread.get(parts[0])
    for part in parts[1:]:
        if current is None:
            return None
        if not part:
            continue
        if part.endswith("]"):
            try:
                index = int(part[:-1])
            except ValueError:
                return None
            if not isinstance(current, list) or not -len(current) <= index < len(current):
                return None
            current = current[index]
        elif isinstance(current, dict):
            current = current.get(part)
        else:
            return None
    return current


async def search_threads(engine: AsyncEngine, *, tenant_id: str, body: ThreadSearch) -> Page:
    fields = check_select(body.select, THREAD_FIELDS)
    extract = check_extract(body.extract)
    check_sort_order(body.sort_order)
    _check_values_filter(body.values)
    ids = [parse_thread_id(i) for i in body.ids] if body.ids is not None else None
    if ids is None and engine.dialect.name == "postgresql":
        rows = await _direct_search(engine, tenant_id, body, count=False)
    else:
        rows = await _search_rows(engine, tenant_id, body, ids)
    items = [
        q.row_to_thread(row).model_dump(mode="json", exclude={"ttl"}) for row in rows[: body.limit]
    ]
    if fields:
        items = [{k: item[k] for k in fields} | _extracted(item, extract) for item in items]
    elif extract:
        items = [item | _extracted(item, extract) for item in items]
    return Page(items=items, has_more=len(rows) > body.limit)


async def _direct_search(
    engine: AsyncEngine, tenant_id: str, body: ThreadSearch | ThreadCount, *, count: bool
) -> list[Any]:
    """Search (one page plus one row) or count on PostgreSQL's direct path."""
    direct = _direct(engine)
    shape: dict[str, Any] = {
        "count": count,
        "metadata": bool(body.metadata),
        "values": bool(body.values),
        "status": body.status is not None,
    }
    params: dict[str, Any] = {
        "tenant_id": tenant_id,
        "metadata": body.metadata,
        "values": body.values,
        "status": body.status,
    }
    if isinstance(body, ThreadSearch):
        shape |= {"sort_by": body.sort_by, "sort_order": (body.sort_order or "desc").lower()}
        if shape["sort_by"] not in THREAD_SORT_COLUMNS:
            shape["sort_by"] = None  # created_at, as order_by decides
        params |= {"limit": body.limit + 1, "offset": body.offset}
    key = ("threads.search", *sorted(shape.items()))
    statement = direct.run.prepared(key, lambda: q.search_statement(**shape))
    return list(await direct.run.fetch(statement, params))


async def _search_rows(
    engine: AsyncEngine, tenant_id: str, body: ThreadSearch, ids: list[str] | None
) -> list[Any]:
    async with reader(engine).connect() as conn:
        stmt = q.filtered(
            select(threads),
            conn.dialect.name,
            tenant_id=tenant_id,
            metadata=body.metadata,
            values=body.values,
            status=body.status,
            ids=ids,
        )
        columns = {name: threads.c[name] for name in THREAD_SORT_COLUMNS}
        stmt = stmt.order_by(
            *order_by(columns, body.sort_by, body.sort_order, tie_breaker=threads.c.thread_id)
        )
        return list((await conn.execute(stmt.limit(body.limit + 1).offset(body.offset))).all())


def _extracted(thread: JSONObject, extract: dict[str, str] | None) -> JSONObject:
    if not extract:
        return {}
    return {"extracted": {alias: extract_path(thread, path) for alias, path in extract.items()}}


def _check_values_filter(values: JSONObject | None) -> None:
    # sealed values are opaque to SQL (app/db/sealed.py); a containment filter would
    # silently match nothing
    if values and sealed.active().enabled:
        raise InvalidInput(
            "filtering threads by `values` is unavailable: thread values are encrypted at "
            "rest (GRAPHKEEP_ENCRYPTION_KEY); filter by metadata instead"
        )


async def count_threads(engine: AsyncEngine, *, tenant_id: str, body: ThreadCount) -> int:
    _check_values_filter(body.values)
    if engine.dialect.name == "postgresql":
        rows = await _direct_search(engine, tenant_id, body, count=True)
        return int(rows[0].n)
    async with reader(engine).connect() as conn:
        stmt = q.filtered(
            select(func.count()).select_from(threads),
            conn.dialect.name,
            tenant_id=tenant_id,
            metadata=body.metadata,
            values=body.values,
            status=body.status,
        )
        return int((await conn.execute(stmt)).scalar_one())


async def copy_thread(engine: AsyncEngine, *, tenant_id: str, thread_id: str, saver: Any) -> Thread:
    """A new idle thread with the same metadata, values cache and every checkpoint.

    A missing source gives 404 (the official server answers 409, which the SDK treats the
    same way; 404 says what is wrong).
    """
    source = await get_thread(engine, tenant_id=tenant_id, thread_id=thread_id)
    target_id = new_thread_id()
    now = utcnow()
    async with engine.begin() as conn:
        await q.insert_thread(
            conn,
            tenant_id=tenant_id,
            thread_id=target_id,
            metadata=dict(source.metadata),
            now=now,
            values=source.values,
            interrupts=dict(source.interrupts),
        )
    await saver.for_tenant(tenant_id).acopy_thread(source.thread_id, target_id)
    return await get_thread(engine, tenant_id=tenant_id, thread_id=target_id)


async def prune_threads(
    engine: AsyncEngine, *, tenant_id: str, body: ThreadPrune, saver: Any
) -> int:
    """`delete` removes the threads; `keep_latest` keeps each thread and its latest state."""
    ids = list(dict.fromkeys(parse_thread_id(i) for i in body.thread_ids))
    if body.strategy == "delete":
        return await delete_threads(engine, tenant_id=tenant_id, thread_ids=ids, saver=saver)
    async with reader(engine).connect() as conn:
        found = list(
            (
                await conn.execute(
                    select(threads.c.thread_id).where(
                        threads.c.tenant_id == tenant_id, threads.c.thread_id.in_(ids)
                    )
                )
            )
            .scalars()
            .all()
        )
    if found:
        await saver.for_tenant(tenant_id).aprune(found, strategy="keep_latest")
    return len(found)


async def thread_visibility(
    engine: AsyncEngine, *, tenant_id: str, thread_id: str, auth_filter: JSONObject | None
) -> bool | None:
    """Custom auth: None when the tenant has no such thread, else whether `auth_filter` (a
    metadata containment object) admits it - tested in SQL, the row itself is not read."""
    stmt = q.visibility_statement(
        engine.dialect.name,
        tenant_id=tenant_id,
        thread_id=parse_thread_id(thread_id),
        auth_filter=auth_filter,
    )
    async with read(engine) as conn:
        row = (await conn.execute(stmt)).first()
    return None if row is None else bool(row.visible)
