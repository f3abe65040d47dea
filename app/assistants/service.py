"""Assistant use cases: one transaction each, scoped to the caller's tenant.

System assistants (one per registered graph, owner SYSTEM_TENANT) are visible to every tenant
and read-only for them: changing a shared assistant would change it for everybody.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Row
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.assistants import queries as q
from app.assistants.schemas import (
    ASSISTANT_FIELDS,
    ASSISTANT_SORT_COLUMNS,
    Assistant,
    AssistantCount,
    AssistantCreate,
    AssistantPatch,
    AssistantSearch,
    AssistantVersion,
    AssistantVersionsSearch,
    JSONObject,
)
from app.db.access import read, transaction
from app.db.ids import parse_uuid
from app.db.listing import check_select, check_sort_order
from app.db.tables import SYSTEM_TENANT
from app.db.types import utcnow
from app.errors import Conflict, Forbidden, InvalidInput, NotFound
from app.graphs.registry import GraphRegistry

# The namespace the official server uses, so default assistant ids match it.
SYSTEM_ASSISTANT_NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")


def system_assistant_id(graph_id: str) -> str:
    """The deterministic id of a graph's default assistant."""
    return str(uuid.uuid5(SYSTEM_ASSISTANT_NAMESPACE, graph_id))


# One statement object per filter shape (a bounded set), so SQLAlchemy's compiled cache and
# asyncpg's prepared statements are hit without rebuilding the statement per request.
_search_statement = functools.lru_cache(maxsize=256)(q.search_statement)


@dataclass(frozen=True)
class Page:
    """One page of a search, plus whether more rows exist (for the pagination headers)."""

    items: list[JSONObject]
    has_more: bool


def _sync_config_context(
    config: JSONObject | None, context: JSONObject | None
) -> tuple[JSONObject, JSONObject]:
    """configurable and context mirror each other; giving both (non-empty) is ambiguous."""
    config = dict(config or {})
    configurable = config.get("configurable")
    if configurable and context:
        raise InvalidInput(
            "give either config.configurable or context, not both (they are kept in sync)"
        )
    if context:
        config["configurable"] = dict(context)
        return config, dict(context)
    if isinstance(configurable, dict) and configurable:
        return config, dict(configurable)
    return config, dict(context or {})


async def ensure_system_assistants(engine: AsyncEngine, *, graphs: GraphRegistry) -> None:
    """Create (or refresh name/description/config of) the default assistant of every graph."""
    now = utcnow()
    async with transaction(engine) as conn:
        dialect = conn.dialect.name
        for graph_id in graphs.graph_ids():
            spec = graphs.spec(graph_id)
            config, context = _sync_config_context(spec.config, None)
            values: JSONObject = {
                "assistant_id": system_assistant_id(graph_id),
                "graph_id": graph_id,
                "name": spec.name,
                "description": spec.description,
                "config": config,
                "context": context,
                "metadata": {"created_by": "system"},
                "version": 1,
            }
            row = {**values, "tenant_id": SYSTEM_TENANT, "created_at": now, "updated_at": now}
            changing = ["graph_id", "name", "description", "config", "context"]
            for stmt in q.upsert_system_assistant(dialect, row, changing=changing):
                await conn.execute(stmt)


def resolve_assistant_id(value: str, *, graphs: GraphRegistry) -> str:
    """A UUID, or a registered graph id meaning that graph's default assistant."""
    if graphs.has(value):
        return system_assistant_id(value)
    return parse_uuid(value, what="assistant_id")


def _require_graph(graphs: GraphRegistry, graph_id: str) -> None:
    if not graphs.has(graph_id):
        raise NotFound(f"Graph '{graph_id}' not found")


def _own_row(row: Any, assistant_id: str, tenant_id: str) -> None:
    if row is None:
        raise NotFound(f"Assistant '{assistant_id}' not found")
    if row.tenant_id != tenant_id:
        raise Forbidden(
            f"Assistant '{assistant_id}' is a system assistant and read-only; "
            "create your own assistant for this graph instead"
        )


def _graph_filter(graphs: GraphRegistry, graph_id: str | None) -> None:
    if graph_id is not None:
        _require_graph(graphs, graph_id)


async def _assistant_row(
    conn: AsyncConnection, tenant_id: str, assistant_id: str, *, for_update: bool = False
) -> Row[Any] | None:
    stmt = q.ASSISTANT_ROW_FOR_UPDATE if for_update else q.ASSISTANT_ROW
    return (await conn.execute(stmt, q.assistant_key(tenant_id, assistant_id))).first()


class AssistantService:
    """The assistant use cases on one engine, for the graphs registered in this server."""

    def __init__(self, *, engine: AsyncEngine, graphs: GraphRegistry) -> None:
        self.engine = engine
        self.graphs = graphs
        self._postgres = engine.dialect.name == "postgresql"

    async def get_assistant(self, *, tenant_id: str, assistant_id: str) -> Assistant:
        """The assistant, or 404 (also when its graph is not registered here)."""
        assistant_id = parse_uuid(assistant_id, what="assistant_id")
        async with read(self.engine) as conn:
            row = await _assistant_row(conn, tenant_id, assistant_id)
        if row is None or not self.graphs.has(row.graph_id):
            raise NotFound(f"Assistant '{assistant_id}' not found")
        return q.row_to_assistant(row)

    async def create_assistant(self, *, tenant_id: str, body: AssistantCreate) -> Assistant:
        _require_graph(self.graphs, body.graph_id)
        assistant_id = (
            parse_uuid(body.assistant_id, what="assistant_id")
            if body.assistant_id
            else str(uuid.uuid4())
        )
        config, context = _sync_config_context(body.config, body.context)
        values: JSONObject = {
            "assistant_id": assistant_id,
            "graph_id": body.graph_id,
            "name": body.name or "Untitled",
            "description": body.description,
            "config": config,
            "context": context,
            "metadata": dict(body.metadata or {}),
            "version": 1,
        }
        try:
            async with transaction(self.engine) as conn:
                existing = await _assistant_row(conn, tenant_id, assistant_id)
                if existing is None:
                    # An id taken by another tenant must not be revealed; the insert fails below.
                    now = utcnow()
                    await conn.execute(
                        q.INSERT_ASSISTANT,
                        q.assistant_row(tenant_id=tenant_id, values=values, now=now),
                    )
                    await conn.execute(
                        q.INSERT_VERSION, q.version_row(tenant_id=tenant_id, values=values, now=now)
                    )
        except IntegrityError:
            existing = None
            raise Conflict(f"Assistant '{assistant_id}' already exists") from None
        if existing is not None:
            if body.if_exists == "do_nothing":
                return q.row_to_assistant(existing)
            raise Conflict(f"Assistant '{assistant_id}' already exists")
        return await self.get_assistant(tenant_id=tenant_id, assistant_id=assistant_id)

    async def patch_assistant(
        self, *, tenant_id: str, assistant_id: str, body: AssistantPatch
    ) -> Assistant:
        """Every patch writes a new version and makes it current."""
        assistant_id = parse_uuid(assistant_id, what="assistant_id")
        if body.graph_id is not None:
            _require_graph(self.graphs, body.graph_id)
        async with transaction(self.engine) as conn:
            row = await _assistant_row(conn, tenant_id, assistant_id, for_update=True)
            _own_row(row, assistant_id, tenant_id)
            assert row is not None
            if body.config is not None or body.context is not None:
                config, context = _sync_config_context(body.config, body.context)
                if body.config is None:
                    config = {**(row.config or {}), "configurable": context}
            else:
                config, context = row.config or {}, row.context or {}
            latest = (await conn.execute(q.max_version(tenant_id, assistant_id))).scalar_one()
            version = int(latest or 0) + 1
            values: JSONObject = {
                "assistant_id": assistant_id,
                "graph_id": body.graph_id or row.graph_id,
                "name": body.name if body.name is not None else row.name,
                "description": body.description
                if body.description is not None
                else row.description,
                "config": config,
                "context": context,
                "metadata": {**(row.metadata or {}), **(body.metadata or {})},
                "version": version,
            }
            now = utcnow()
            await conn.execute(
                q.INSERT_VERSION, q.version_row(tenant_id=tenant_id, values=values, now=now)
            )
            await conn.execute(
                q.update_assistant(tenant_id, assistant_id, {**values, "updated_at": now})
            )
        return await self.get_assistant(tenant_id=tenant_id, assistant_id=assistant_id)

    async def active_run_ids(self, *, tenant_id: str, assistant_id: str) -> list[str]:
        """Pending or running runs of this assistant (cancelled before it is deleted)."""
        assistant_id = parse_uuid(assistant_id, what="assistant_id")
        async with read(self.engine) as conn:
            stmt = q.active_run_ids(tenant_id, assistant_id)
            return list((await conn.execute(stmt)).scalars().all())

    async def delete_assistant(self, *, tenant_id: str, assistant_id: str) -> None:
        """Delete the assistant and all its versions (404 if it is not this tenant's)."""
        assistant_id = parse_uuid(assistant_id, what="assistant_id")
        async with transaction(self.engine) as conn:
            row = await _assistant_row(conn, tenant_id, assistant_id)
            _own_row(row, assistant_id, tenant_id)
            for stmt in q.delete_assistant(tenant_id, assistant_id):
                await conn.execute(stmt)

    async def _bound_search(
        self, tenant_id: str, body: AssistantSearch | AssistantCount, *, count: bool
    ) -> list[Any]:
        """Search (one page plus one row) or count on PostgreSQL: one statement per filter
        shape and graph-id set (fixed for a server's life), every value bound."""
        shape: dict[str, Any] = {
            "graph_ids": tuple(self.graphs.graph_ids()),
            "count": count,
            "metadata": bool(body.metadata),
            "graph_id": body.graph_id is not None,
            "name": bool(body.name),
        }
        params: dict[str, Any] = {
            "tenant_id": tenant_id,
            "metadata": body.metadata,
            "graph_id": body.graph_id,
            "name_pattern": q.contains_pattern(body.name) if body.name else None,
        }
        if isinstance(body, AssistantSearch):
            sort_by = body.sort_by if body.sort_by in ASSISTANT_SORT_COLUMNS else None
            shape |= {"sort_by": sort_by, "sort_order": (body.sort_order or "desc").lower()}
            params |= {"limit": body.limit + 1, "offset": body.offset}
        async with read(self.engine) as conn:
            return list((await conn.execute(_search_statement(**shape), params)).all())

    async def search_assistants(self, *, tenant_id: str, body: AssistantSearch) -> Page:
        fields = check_select(body.select, ASSISTANT_FIELDS)
        check_sort_order(body.sort_order)
        _graph_filter(self.graphs, body.graph_id)
        if self._postgres:
            rows = await self._bound_search(tenant_id, body, count=False)
        else:
            rows = await self._search_rows(tenant_id, body)
        items = [q.row_to_assistant(row).model_dump(mode="json") for row in rows[: body.limit]]
        if fields:
            items = [{k: item[k] for k in fields} for item in items]
        return Page(items=items, has_more=len(rows) > body.limit)

    async def _search_rows(self, tenant_id: str, body: AssistantSearch) -> list[Any]:
        async with read(self.engine) as conn:
            stmt = q.search_page(
                conn.dialect.name,
                tenant_id=tenant_id,
                graph_ids=self.graphs.graph_ids(),
                metadata=body.metadata,
                graph_id=body.graph_id,
                name=body.name,
                sort_by=body.sort_by,
                sort_order=body.sort_order,
                limit=body.limit + 1,
                offset=body.offset,
            )
            return list((await conn.execute(stmt)).all())

    async def count_assistants(self, *, tenant_id: str, body: AssistantCount) -> int:
        _graph_filter(self.graphs, body.graph_id)
        if self._postgres:
            rows = await self._bound_search(tenant_id, body, count=True)
            return int(rows[0].n)
        async with read(self.engine) as conn:
            stmt = q.count_statement(
                conn.dialect.name,
                tenant_id=tenant_id,
                graph_ids=self.graphs.graph_ids(),
                metadata=body.metadata,
                graph_id=body.graph_id,
                name=body.name,
            )
            return int((await conn.execute(stmt)).scalar_one())

    async def list_versions(
        self, *, tenant_id: str, assistant_id: str, body: AssistantVersionsSearch
    ) -> list[AssistantVersion]:
        """Versions, newest first (404 for an unknown assistant)."""
        assistant = await self.get_assistant(tenant_id=tenant_id, assistant_id=assistant_id)
        async with read(self.engine) as conn:
            stmt = q.versions_query(
                conn.dialect.name,
                tenant_id=tenant_id,
                assistant_id=assistant.assistant_id,
                metadata=body.metadata,
                limit=body.limit,
                offset=body.offset,
            )
            rows = (await conn.execute(stmt)).all()
        return [q.row_to_version(row) for row in rows]

    async def set_latest_version(
        self, *, tenant_id: str, assistant_id: str, version: int
    ) -> Assistant:
        """Make an existing version current again (its config, context, metadata, name...)."""
        assistant_id = parse_uuid(assistant_id, what="assistant_id")
        async with transaction(self.engine) as conn:
            row = await _assistant_row(conn, tenant_id, assistant_id, for_update=True)
            _own_row(row, assistant_id, tenant_id)
            found = await conn.execute(q.find_version(tenant_id, assistant_id, version))
            chosen = found.first()
            if chosen is None:
                raise NotFound(f"Assistant '{assistant_id}' has no version {version}")
            await conn.execute(
                q.update_assistant(
                    tenant_id,
                    assistant_id,
                    {
                        "graph_id": chosen.graph_id,
                        "name": chosen.name,
                        "description": chosen.description,
                        "config": chosen.config,
                        "context": chosen.context,
                        "metadata": chosen.metadata,
                        "version": chosen.version,
                        "updated_at": utcnow(),
                    },
                )
            )
        return await self.get_assistant(tenant_id=tenant_id, assistant_id=assistant_id)

    async def assistant_visibility(
        self, *, tenant_id: str, assistant_id: str, auth_filter: JSONObject | None
    ) -> bool | None:
        """Custom auth: None when the tenant cannot read such an assistant, else whether
        `auth_filter` (a metadata containment object) admits it, tested in SQL."""
        stmt = q.visibility_statement(
            self.engine.dialect.name,
            tenant_id=tenant_id,
            assistant_id=resolve_assistant_id(assistant_id, graphs=self.graphs),
            auth_filter=auth_filter,
        )
        async with read(self.engine) as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else bool(row.visible)
