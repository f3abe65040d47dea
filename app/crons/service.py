"""Cron use cases for the API: create (stateless or on a thread), get, update, delete, search.

Every check happens before the insert: a bad schedule, an unknown timezone, an end_time in the
past, a schedule that never fires, a missing assistant or thread give 422/404 and write
nothing. The cron keeps its creator's user id; its firings run as that identity.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app.assistants import queries as assistant_queries
from app.assistants.service import resolve_assistant_id
from app.auth.principal import Principal
from app.crons import queries as q
from app.crons.schedule import DEFAULT_TIMEZONE, next_after, parse_timezone, validate_schedule
from app.crons.schemas import (
    CRON_FIELDS,
    PAYLOAD_FIELDS,
    CronCount,
    CronCreate,
    CronSearch,
    CronStatus,
    CronUpdate,
    cron_json,
)
from app.db.access import read, transaction
from app.db.ids import parse_uuid
from app.db.listing import check_select, check_sort_order
from app.db.types import utcnow
from app.errors import InvalidInput, NotFound, ValidationFailed
from app.graphs.config import ServerConfig
from app.runs import prepare
from app.runs.schemas import RunCreate, new_run_id

JSONObject = dict[str, Any]


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _first_due(schedule: str, timezone: str, end_time: datetime | None, now: datetime) -> Any:
    due = next_after(schedule, parse_timezone(timezone), now)
    if end_time is not None and due > end_time:
        return None
    return due


def _payload(body: CronCreate | CronUpdate, fields: set[str]) -> JSONObject:
    return {name: getattr(body, name) for name in PAYLOAD_FIELDS if name in fields}


def check_run_payload(
    payload: JSONObject, *, assistant_id: str, stateless: bool, config: ServerConfig
) -> None:
    """The run each firing will create must be valid now (422/400 at create, not at 3 am)."""
    try:
        run = RunCreate(assistant_id=assistant_id, **payload)
    except ValueError as exc:
        raise ValidationFailed(f"cron payload: {exc}") from None
    prepare.validate(run, stateless=stateless, webhook_url=config.webhooks.url)


class CronService:
    def __init__(self, *, engine: AsyncEngine, graphs: Any) -> None:
        self.engine = engine
        self.graphs = graphs

    async def create(
        self, *, principal: Principal, thread_id: str | None, body: CronCreate
    ) -> JSONObject:
        schedule = validate_schedule(body.schedule)
        timezone = body.timezone or DEFAULT_TIMEZONE
        parse_timezone(timezone)
        now = utcnow()
        end_time = _aware(body.end_time) if body.end_time is not None else None
        if end_time is not None and end_time <= now:
            raise ValidationFailed("end_time: must be in the future")
        next_run = _first_due(schedule, timezone, end_time, now)
        if next_run is None:
            raise ValidationFailed("schedule: it never fires before end_time")
        try:
            assistant_id = resolve_assistant_id(body.assistant_id, graphs=self.graphs)
        except ValidationFailed:
            raise NotFound(f"Assistant '{body.assistant_id}' not found") from None
        payload = _payload(body, body.model_fields_set)
        payload = {k: v for k, v in payload.items() if v is not None}
        if thread_id is None:
            payload.pop("multitask_strategy", None)  # a new thread each time: nothing to share
        check_run_payload(
            payload,
            assistant_id=assistant_id,
            stateless=thread_id is None,
            config=self.graphs.config,
        )
        tenant_id = principal.tenant_id
        async with transaction(self.engine) as conn:
            assistant = await assistant_queries.find_row(
                conn, tenant_id=tenant_id, assistant_id=assistant_id
            )
            if assistant is None or not self.graphs.has(assistant.graph_id):
                raise NotFound(f"Assistant '{assistant_id}' not found")
            if thread_id is not None:
                thread_id = parse_uuid(thread_id, what="thread_id")
                if not await q.thread_exists(conn, tenant_id=tenant_id, thread_id=thread_id):
                    raise NotFound(f"Thread '{thread_id}' not found")
            row = await q.insert_cron(
                conn,
                {
                    "cron_id": new_run_id(),
                    "tenant_id": tenant_id,
                    "assistant_id": assistant_id,
                    "thread_id": thread_id,
                    "user_id": principal.user_id,
                    "schedule": schedule,
                    "timezone": timezone,
                    "next_run_date": next_run,
                    "end_time": end_time,
                    "enabled": True if body.enabled is None else body.enabled,
                    "status": CronStatus.ACTIVE,
                    "on_run_completed": (body.on_run_completed or "delete")
                    if thread_id is None
                    else None,
                    "payload": payload,
                    "metadata": body.metadata or {},
                    "created_at": now,
                    "updated_at": now,
                },
            )
        return cron_json(row)

    async def get(self, *, tenant_id: str, cron_id: str) -> JSONObject:
        cron_id = parse_uuid(cron_id, what="cron_id")
        async with read(self.engine) as conn:
            row = await q.find_cron(conn, tenant_id=tenant_id, cron_id=cron_id)
        if row is None:
            raise NotFound(f"Cron '{cron_id}' not found")
        return cron_json(row)

    async def update(self, *, tenant_id: str, cron_id: str, body: CronUpdate) -> JSONObject:
        cron_id = parse_uuid(cron_id, what="cron_id")
        fields = body.model_fields_set
        if not fields:
            raise InvalidInput("empty update: send at least one field")
        now = utcnow()
        if body.schedule is not None:
            validate_schedule(body.schedule)
        if body.timezone is not None:
            parse_timezone(body.timezone)
        if body.end_time is not None and _aware(body.end_time) <= now:
            raise ValidationFailed("end_time: must be in the future")
        async with transaction(self.engine) as conn:
            row = await q.find_cron(conn, tenant_id=tenant_id, cron_id=cron_id, for_update=True)
            if row is None:
                raise NotFound(f"Cron '{cron_id}' not found")
            values: JSONObject = {"updated_at": now}
            payload = {**row.payload, **_payload(body, fields)}
            payload = {k: v for k, v in payload.items() if v is not None}
            if row.thread_id is None:
                payload.pop("multitask_strategy", None)
            check_run_payload(
                payload,
                assistant_id=row.assistant_id,
                stateless=row.thread_id is None,
                config=self.graphs.config,
            )
            values["payload"] = payload
            if body.metadata is not None:
                values["metadata"] = body.metadata
            if body.on_run_completed is not None and row.thread_id is None:
                values["on_run_completed"] = body.on_run_completed
            schedule = validate_schedule(body.schedule) if body.schedule else row.schedule
            timezone = body.timezone or row.timezone
            end_time = row.end_time
            if "end_time" in fields:  # null clears it
                end_time = _aware(body.end_time) if body.end_time is not None else None
            enabled = row.enabled if body.enabled is None else body.enabled
            values.update(schedule=schedule, timezone=timezone, end_time=end_time, enabled=enabled)
            # A new schedule, timezone, end or re-enabling: the next due time counts from now,
            # so the slots a disabled cron skipped never fire.
            recompute = bool({"schedule", "timezone", "end_time"} & fields) or (
                enabled and not row.enabled
            )
            if recompute:
                next_run = _first_due(schedule, timezone, end_time, now)
                values["next_run_date"] = next_run
                values["status"] = CronStatus.ACTIVE if next_run else CronStatus.ENDED
            updated = await q.update_cron(conn, tenant_id=tenant_id, cron_id=cron_id, values=values)
        assert updated is not None  # locked above
        return cron_json(updated)

    async def delete(self, *, tenant_id: str, cron_id: str) -> None:
        cron_id = parse_uuid(cron_id, what="cron_id")
        async with transaction(self.engine) as conn:
            if not await q.delete_cron(conn, tenant_id=tenant_id, cron_id=cron_id):
                raise NotFound(f"Cron '{cron_id}' not found")

    def _where(self, tenant_id: str, body: CronSearch | CronCount, enabled: bool | None) -> Any:
        return q.filtered(
            self.engine.dialect.name,
            tenant_id=tenant_id,
            assistant_id=body.assistant_id,
            thread_id=body.thread_id,
            enabled=enabled,
            metadata=body.metadata,
        )

    async def search(self, *, tenant_id: str, body: CronSearch) -> tuple[list[JSONObject], bool]:
        check_sort_order(body.sort_order)
        select = check_select(body.select, CRON_FIELDS)
        stmt = q.search_statement(
            self._where(tenant_id, body, body.enabled),
            sort_by=body.sort_by,
            sort_order=body.sort_order,
            limit=body.limit,
            offset=body.offset,
        )
        async with read(self.engine) as conn:
            rows = (await conn.execute(stmt)).all()
        has_more = len(rows) > body.limit
        return [cron_json(r, select) for r in rows[: body.limit]], has_more

    async def count(self, *, tenant_id: str, body: CronCount) -> int:
        stmt = q.count_statement(self._where(tenant_id, body, None))
        async with read(self.engine) as conn:
            return int((await conn.execute(stmt)).scalar_one())


async def cron_visibility(
    engine: AsyncEngine, *, tenant_id: str, cron_id: str, auth_filter: JSONObject | None
) -> bool | None:
    """Custom auth: None when the tenant has no such cron, else whether `auth_filter` (a
    metadata containment object) admits it, tested in SQL."""
    stmt = q.visibility_statement(
        engine.dialect.name,
        tenant_id=tenant_id,
        cron_id=parse_uuid(cron_id, what="cron_id"),
        auth_filter=auth_filter,
    )
    async with read(engine) as conn:
        row = (await conn.execute(stmt)).first()
    return None if row is None else bool(row.visible)
