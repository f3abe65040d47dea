"""Thread use cases (rows, search, copy, prune): `ThreadService`; state and history live in
state.py and reach the graphs, saver and store through the service's `storage`.

Each method owns one transaction (`app.db.access`) and is scoped by `tenant_id`. Checkpoints go
through the tenant's view of the saver (`saver.for_tenant`).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from uuid_utils.compat import uuid7

from app.db import sealed
from app.db.access import read, transaction
from app.db.dialect import single_statement_autocommit
from app.db.ids import parse_uuid
from app.db.listing import check_select, check_sort_order
from app.db.types import utcnow
from app.errors import Conflict, InvalidInput, NotFound, ValidationFailed
from app.graphs.registry import GraphRegistry
from app.statuses import ThreadStatus
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
    return parse_uuid(value, what="thread_id")


def new_thread_id() -> str:
    """UUIDv7: time-ordered, so sorting by id follows creation time (as the official server)."""
    return str(uuid7())


# One statement object per filter shape (a bounded set), so SQLAlchemy's compiled cache and
# asyncpg's prepared statements are hit without rebuilding the statement per request.
_search_statement = functools.lru_cache(maxsize=256)(q.search_statement)


@dataclass(frozen=True)
class GraphStorage:
    """What reading or changing a thread's graph state needs (app/threads/state.py): the
    thread rows, the graphs, and the server-wide saver and store (scoped to the caller's
    tenant on every call). Built once, by `ThreadService`."""

    threads: ThreadService
    graphs: GraphRegistry
    saver: Any
    store: Any

    @property
    def engine(self) -> AsyncEngine:
        return self.threads.engine


# An owner filter is one per user: the most recent ones are kept (built once, so SQLAlchemy's
# compiled cache finds them without rebuilding the statement per request)
@functools.lru_cache(maxsize=1024)
def _filtered_row_sqlite(auth_filter_json: str) -> Any:
    return q.filtered_thread_row_sqlite(json.loads(auth_filter_json))


class ThreadService:
    """The thread use cases on one engine, with the saver their deletes and copies reach."""

    def __init__(
        self, *, engine: AsyncEngine, graphs: GraphRegistry, saver: Any, store: Any = None
    ) -> None:
        self.engine = engine
        self.saver = saver
        self._postgres = engine.dialect.name == "postgresql"
        self.storage = GraphStorage(threads=self, graphs=graphs, saver=saver, store=store)

    async def find_thread(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        include_ttl: bool = False,
        auth_filter: JSONObject | None = None,
    ) -> Thread | None:
        """The thread, or None (also for another tenant's thread, and one a custom-auth
        `auth_filter` does not admit: tested in the same statement)."""
        params: dict[str, Any] = {"tenant_id": tenant_id, "thread_id": thread_id}
        if not auth_filter:
            stmt = q.THREAD_ROW
        elif self.engine.dialect.name == "postgresql":  # the filter is one JSONB bind
            stmt, params["auth_filter"] = q.FILTERED_THREAD_ROW_PG, auth_filter
        else:  # SQLite spells containment per value: one statement per filter, kept
            stmt = _filtered_row_sqlite(json.dumps(auth_filter, sort_keys=True))
        async with read(self.engine) as conn:
            row = (await conn.execute(stmt, params)).first()
        return q.row_to_thread(row, include_ttl=include_ttl) if row is not None else None

    async def get_thread(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        include_ttl: bool = False,
        auth_filter: JSONObject | None = None,
    ) -> Thread:
        """The thread, or 404 (also for another tenant's thread, or one `auth_filter` hides)."""
        thread_id = parse_thread_id(thread_id)
        thread = await self.find_thread(
            tenant_id=tenant_id,
            thread_id=thread_id,
            include_ttl=include_ttl,
            auth_filter=auth_filter,
        )
        if thread is None:
            raise NotFound(f"Thread '{thread_id}' not found")
        return thread

    async def thread_visibility(
        self, *, tenant_id: str, thread_id: str, auth_filter: JSONObject | None
    ) -> bool | None:
        """Custom auth: None when the tenant has no such thread, else whether `auth_filter`
        (a metadata containment object) admits it - tested in SQL, the row itself not read."""
        stmt = q.visibility_statement(
            self.engine.dialect.name,
            tenant_id=tenant_id,
            thread_id=parse_thread_id(thread_id),
            auth_filter=auth_filter,
        )
        async with read(self.engine) as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else bool(row.visible)

    async def get_thread_metadata(
        self, *, tenant_id: str, thread_id: str
    ) -> tuple[str, JSONObject]:
        """(canonical thread id, metadata) of the thread, or 404; reads nothing else of the row."""
        thread_id = parse_thread_id(thread_id)
        async with read(self.engine) as conn:
            row = (
                await conn.execute(
                    q.THREAD_METADATA, {"tenant_id": tenant_id, "thread_id": thread_id}
                )
            ).first()
        if row is None:
            raise NotFound(f"Thread '{thread_id}' not found")
        return thread_id, dict(row.metadata or {})

    async def create_thread(self, *, tenant_id: str, body: ThreadCreate) -> Thread:
        generated = not body.thread_id
        thread_id = parse_thread_id(body.thread_id) if body.thread_id else new_thread_id()
        now = utcnow()
        metadata = dict(body.metadata or {})
        row = q.thread_row(
            tenant_id=tenant_id,
            thread_id=thread_id,
            metadata=metadata,
            now=now,
            extra=q.ttl_columns(body.ttl, now),
        )
        existing = None
        try:
            if generated:
                # A fresh UUIDv7 cannot exist yet: no lookup; the INSERT alone is the
                # transaction (one autocommitted round trip on PostgreSQL).
                async with transaction(self.engine, one_statement=True) as conn:
                    await conn.execute(q.INSERT_THREAD, row)
            else:
                async with transaction(self.engine) as conn:
                    existing = await _thread_row(conn, tenant_id, thread_id)
                    if existing is None:
                        await conn.execute(q.INSERT_THREAD, row)
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
            metadata=metadata,
            config={},
            status=ThreadStatus.IDLE,
            values=None,
            interrupts={},
        )

    async def patch_thread(self, *, tenant_id: str, thread_id: str, body: ThreadPatch) -> Thread:
        """Shallow-merge metadata; replace the TTL when given."""
        thread_id = parse_thread_id(thread_id)
        now = utcnow()
        if single_statement_autocommit(self.engine.dialect) and body.ttl is None:
            # the common patch (metadata only) in one autocommitted statement
            async with transaction(self.engine, one_statement=True) as conn:
                row = (
                    await conn.execute(
                        q.PATCH_THREAD_METADATA_PG,
                        {
                            "b_tenant_id": tenant_id,
                            "b_thread_id": thread_id,
                            "patch": dict(body.metadata or {}),
                            "now": now,
                        },
                    )
                ).first()
            if row is None:
                raise NotFound(f"Thread '{thread_id}' not found")
            return q.row_to_thread(row)
        async with transaction(self.engine) as conn:
            found = await _thread_row(conn, tenant_id, thread_id)
            if found is None:
                raise NotFound(f"Thread '{thread_id}' not found")
            changes: JSONObject = {"updated_at": now, **q.ttl_columns(body.ttl, now)}
            if body.metadata:
                changes["metadata"] = {**(found.metadata or {}), **body.metadata}
            await conn.execute(q.update_thread(tenant_id, thread_id, changes))
        return await self.get_thread(tenant_id=tenant_id, thread_id=thread_id)

    async def delete_threads(self, *, tenant_id: str, thread_ids: list[str]) -> int:
        """Delete threads, their runs, run events and checkpoints, in one transaction; unknown
        ids are skipped."""
        async with transaction(self.engine) as conn:
            deleted = await _delete_thread_rows(conn, tenant_id, thread_ids)
            if deleted:
                await self.saver.for_tenant(tenant_id).adelete_threads_in(conn, deleted)
        return len(deleted)

    async def delete_thread(self, *, tenant_id: str, thread_id: str) -> None:
        thread_id = parse_thread_id(thread_id)
        if not await self.delete_threads(tenant_id=tenant_id, thread_ids=[thread_id]):
            raise NotFound(f"Thread '{thread_id}' not found")

    async def active_run_ids(self, *, tenant_id: str, thread_id: str) -> list[str]:
        """Pending or running runs of the thread (to cancel them before a delete)."""
        async with read(self.engine) as conn:
            stmt = q.active_run_ids(tenant_id, thread_id)
            return list((await conn.execute(stmt)).scalars().all())

    async def delete_threads_of_assistant(self, *, tenant_id: str, assistant_id: str) -> int:
        """Threads whose metadata.assistant_id is this assistant (DELETE ?delete_threads=true)."""
        async with read(self.engine) as conn:
            stmt = q.thread_ids_by_metadata(
                conn.dialect.name, tenant_id=tenant_id, metadata={"assistant_id": assistant_id}
            )
            ids = list((await conn.execute(stmt)).scalars().all())
        return await self.delete_threads(tenant_id=tenant_id, thread_ids=ids)

    async def search_threads(self, *, tenant_id: str, body: ThreadSearch) -> Page:
        fields = check_select(body.select, THREAD_FIELDS)
        extract = check_extract(body.extract)
        check_sort_order(body.sort_order)
        _check_values_filter(body.values)
        ids = [parse_thread_id(i) for i in body.ids] if body.ids is not None else None
        if ids is None and self._postgres:
            rows = await self._bound_search(tenant_id, body, count=False)
        else:
            rows = await self._search_rows(tenant_id, body, ids)
        items = [
            q.row_to_thread(row).model_dump(mode="json", exclude={"ttl"})
            for row in rows[: body.limit]
        ]
        if fields:
            items = [{k: item[k] for k in fields} | _extracted(item, extract) for item in items]
        elif extract:
            items = [item | _extracted(item, extract) for item in items]
        return Page(items=items, has_more=len(rows) > body.limit)

    async def _bound_search(
        self, tenant_id: str, body: ThreadSearch | ThreadCount, *, count: bool
    ) -> list[Any]:
        """Search (one page plus one row) or count on PostgreSQL: one statement per filter
        shape, every value bound."""
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
        async with read(self.engine) as conn:
            return list((await conn.execute(_search_statement(**shape), params)).all())

    async def _search_rows(
        self, tenant_id: str, body: ThreadSearch, ids: list[str] | None
    ) -> list[Any]:
        async with read(self.engine) as conn:
            page = q.search_page(
                conn.dialect.name,
                tenant_id=tenant_id,
                metadata=body.metadata,
                values=body.values,
                status=body.status,
                ids=ids,
                sort_by=body.sort_by,
                sort_order=body.sort_order,
                limit=body.limit + 1,
                offset=body.offset,
            )
            return list((await conn.execute(page)).all())

    async def count_threads(self, *, tenant_id: str, body: ThreadCount) -> int:
        _check_values_filter(body.values)
        if self._postgres:
            rows = await self._bound_search(tenant_id, body, count=True)
            return int(rows[0].n)
        async with read(self.engine) as conn:
            stmt = q.count_statement(
                conn.dialect.name,
                tenant_id=tenant_id,
                metadata=body.metadata,
                values=body.values,
                status=body.status,
            )
            return int((await conn.execute(stmt)).scalar_one())

    async def copy_thread(self, *, tenant_id: str, thread_id: str) -> Thread:
        """A new idle thread with the same metadata, values cache and every checkpoint.

        A missing source gives 404 (the official server answers 409, which the SDK treats the
        same way; 404 says what is wrong).
        """
        source = await self.get_thread(tenant_id=tenant_id, thread_id=thread_id)
        target_id = new_thread_id()
        now = utcnow()
        async with transaction(self.engine) as conn:
            row = q.thread_row(
                tenant_id=tenant_id,
                thread_id=target_id,
                metadata=dict(source.metadata),
                now=now,
                values=source.values,
                interrupts=dict(source.interrupts),
            )
            await conn.execute(q.INSERT_THREAD, row)
        await self.saver.for_tenant(tenant_id).acopy_thread(source.thread_id, target_id)
        return await self.get_thread(tenant_id=tenant_id, thread_id=target_id)

    async def prune_threads(self, *, tenant_id: str, body: ThreadPrune) -> int:
        """`delete` removes the threads; `keep_latest` keeps each thread and its latest state."""
        ids = list(dict.fromkeys(parse_thread_id(i) for i in body.thread_ids))
        if body.strategy == "delete":
            return await self.delete_threads(tenant_id=tenant_id, thread_ids=ids)
        async with read(self.engine) as conn:
            found = list(
                (await conn.execute(q.existing_thread_ids(tenant_id, ids))).scalars().all()
            )
        if found:
            await self.saver.for_tenant(tenant_id).aprune(found, strategy="keep_latest")
        return len(found)


async def _thread_row(conn: AsyncConnection, tenant_id: str, thread_id: str) -> Any:
    return (await conn.execute(q.THREAD_ROW, q.thread_key(tenant_id, thread_id))).first()


async def _delete_thread_rows(
    conn: AsyncConnection, tenant_id: str, thread_ids: list[str]
) -> list[str]:
    """Delete threads with their runs and run events; returns the ids that existed."""
    if not thread_ids:
        return []
    stmt = q.existing_thread_ids(tenant_id, thread_ids)
    found = list((await conn.execute(stmt)).scalars().all())
    if found:
        for delete in q.delete_thread_rows(tenant_id, found):
            await conn.execute(delete)
    return found


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
