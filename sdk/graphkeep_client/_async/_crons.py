"""Crons: runs the server starts on a schedule, on one thread or on a new thread each time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from .._calls import Call, drop_none, model, model_list, parse_int, parse_none, seg
from .._models import Cron, MultitaskStrategy, SortOrder
from ._http import AsyncHTTP

OnRunCompleted = Literal["delete", "keep"]
_UNSET: Any = object()  # `end_time` left out of an update (None clears it)


def _cron_body(
    *,
    assistant_id: str | None,
    schedule: str | None,
    timezone: str | None,
    end_time: datetime | None,
    enabled: bool | None,
    options: Mapping[str, Any],
) -> dict[str, Any]:
    body = drop_none(
        assistant_id=assistant_id,
        schedule=schedule,
        timezone=timezone,
        end_time=end_time.isoformat() if end_time is not None else None,
        enabled=enabled,
        **options,
    )
    return body


class AsyncCrons:
    """`client.crons`: create, read, update, search and delete scheduled runs."""

    def __init__(self, http: AsyncHTTP) -> None:
        self._http = http

    async def create(
        self,
        assistant_id: str,
        *,
        schedule: str,
        timezone: str | None = None,
        end_time: datetime | None = None,
        enabled: bool | None = None,
        on_run_completed: OnRunCompleted | None = None,
        input: Any = None,
        metadata: Mapping[str, Any] | None = None,
        config: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        webhook: str | None = None,
    ) -> Cron:
        """A stateless cron: each firing runs on a new thread (deleted afterwards unless
        `on_run_completed="keep"`)."""
        options = drop_none(
            on_run_completed=on_run_completed,
            input=input,
            metadata=metadata,
            config=config,
            context=context,
            webhook=webhook,
        )
        body = _cron_body(
            assistant_id=assistant_id,
            schedule=schedule,
            timezone=timezone,
            end_time=end_time,
            enabled=enabled,
            options=options,
        )
        return await self._http.call(Call("POST", "/runs/crons", _one, body=body))

    async def create_for_thread(
        self,
        thread_id: str,
        assistant_id: str,
        *,
        schedule: str,
        timezone: str | None = None,
        end_time: datetime | None = None,
        enabled: bool | None = None,
        multitask_strategy: MultitaskStrategy | None = None,
        input: Any = None,
        metadata: Mapping[str, Any] | None = None,
        config: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        webhook: str | None = None,
    ) -> Cron:
        """A cron on one thread; a firing while the thread is busy follows
        `multitask_strategy` (default enqueue)."""
        options = drop_none(
            multitask_strategy=multitask_strategy,
            input=input,
            metadata=metadata,
            config=config,
            context=context,
            webhook=webhook,
        )
        body = _cron_body(
            assistant_id=assistant_id,
            schedule=schedule,
            timezone=timezone,
            end_time=end_time,
            enabled=enabled,
            options=options,
        )
        path = f"/threads/{seg(thread_id)}/runs/crons"
        return await self._http.call(Call("POST", path, _one, body=body))

    async def get(self, cron_id: str) -> Cron:
        """One cron by id (NotFound if it does not exist)."""
        return await self._http.call(Call("GET", f"/runs/crons/{seg(cron_id)}", _one))

    async def update(
        self,
        cron_id: str,
        *,
        schedule: str | None = None,
        timezone: str | None = None,
        end_time: datetime | None = _UNSET,
        enabled: bool | None = None,
        on_run_completed: OnRunCompleted | None = None,
        input: Any = None,
        metadata: Mapping[str, Any] | None = None,
        config: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        webhook: str | None = None,
    ) -> Cron:
        """Change a cron. A new schedule, timezone or end, or re-enabling, counts the next
        due time from now. `end_time=None` clears the end; leaving it out keeps it."""
        body = drop_none(
            schedule=schedule,
            timezone=timezone,
            enabled=enabled,
            on_run_completed=on_run_completed,
            input=input,
            metadata=metadata,
            config=config,
            context=context,
            webhook=webhook,
        )
        if end_time is not _UNSET:
            body["end_time"] = end_time.isoformat() if end_time is not None else None
        path = f"/runs/crons/{seg(cron_id)}"
        return await self._http.call(Call("PATCH", path, _one, body=body))

    async def delete(self, cron_id: str) -> None:
        """Delete a cron (runs it already started are not touched)."""
        await self._http.call(Call("DELETE", f"/runs/crons/{seg(cron_id)}", parse_none))

    async def search(
        self,
        *,
        assistant_id: str | None = None,
        thread_id: str | None = None,
        enabled: bool | None = None,
        metadata: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        sort_by: str | None = None,
        sort_order: SortOrder | None = None,
        select: Sequence[str] | None = None,
    ) -> list[Cron]:
        """Crons matching all given filters (metadata by containment), newest first."""
        body = drop_none(
            assistant_id=assistant_id,
            thread_id=thread_id,
            enabled=enabled,
            metadata=metadata,
            limit=limit,
            offset=offset,
            sort_by=sort_by,
            sort_order=sort_order,
            select=list(select) if select is not None else None,
        )
        return await self._http.call(
            Call("POST", "/runs/crons/search", _many, body=body, idempotent=True)
        )

    async def count(
        self,
        *,
        assistant_id: str | None = None,
        thread_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> int:
        """How many crons match the filters."""
        body = drop_none(assistant_id=assistant_id, thread_id=thread_id, metadata=metadata)
        return await self._http.call(
            Call("POST", "/runs/crons/count", parse_int, body=body, idempotent=True)
        )


_one = model(Cron.from_json)
_many = model_list(Cron.from_json)
