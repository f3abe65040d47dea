"""Assistants: configured graphs, with a version history."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._calls import (
    Call,
    drop_none,
    model,
    model_list,
    parse_int,
    parse_none,
    parse_object,
    seg,
)
from .._models import Assistant, IfExists, SortOrder
from ._http import AsyncHTTP


class AsyncAssistants:
    """`client.assistants`: create, read, update, version and delete assistants."""

    def __init__(self, http: AsyncHTTP) -> None:
        self._http = http

    async def get(self, assistant_id: str) -> Assistant:
        """One assistant by id (NotFound if it does not exist)."""
        return await self._http.call(Call("GET", f"/assistants/{seg(assistant_id)}", _one))

    async def schemas(self, assistant_id: str) -> dict[str, Any]:
        """The graph's JSON schemas (`input_schema`, `output_schema`, `state_schema`, ...)."""
        path = f"/assistants/{seg(assistant_id)}/schemas"
        return await self._http.call(Call("GET", path, parse_object))

    async def create(
        self,
        graph_id: str,
        *,
        config: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        assistant_id: str | None = None,
        if_exists: IfExists | None = None,
        name: str | None = None,
        description: str | None = None,
    ) -> Assistant:
        """Create an assistant for a registered graph.

        With `assistant_id` and `if_exists="do_nothing"` the call is idempotent (an existing
        assistant is returned unchanged), so it is retried like a read.
        """
        body = drop_none(
            graph_id=graph_id,
            config=config,
            context=context,
            metadata=metadata,
            assistant_id=assistant_id,
            if_exists=if_exists,
            name=name,
            description=description,
        )
        repeatable = assistant_id is not None and if_exists == "do_nothing"
        return await self._http.call(
            Call("POST", "/assistants", _one, body=body, idempotent=repeatable)
        )

    async def update(
        self,
        assistant_id: str,
        *,
        graph_id: str | None = None,
        config: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        name: str | None = None,
        description: str | None = None,
    ) -> Assistant:
        """Change an assistant; every update creates a new version and makes it current.

        `metadata` is merged into the old metadata; `config` and `context` replace theirs.
        """
        body = drop_none(
            graph_id=graph_id,
            config=config,
            context=context,
            metadata=metadata,
            name=name,
            description=description,
        )
        return await self._http.call(
            Call("PATCH", f"/assistants/{seg(assistant_id)}", _one, body=body)
        )

    async def delete(self, assistant_id: str, *, delete_threads: bool = False) -> None:
        """Delete an assistant (and, with `delete_threads`, the threads it created)."""
        params = {"delete_threads": "true"} if delete_threads else None
        await self._http.call(
            Call("DELETE", f"/assistants/{seg(assistant_id)}", parse_none, params=params)
        )

    async def search(
        self,
        *,
        metadata: Mapping[str, Any] | None = None,
        graph_id: str | None = None,
        name: str | None = None,
        limit: int = 10,
        offset: int = 0,
        sort_by: str | None = None,
        sort_order: SortOrder | None = None,
        select: Sequence[str] | None = None,
    ) -> list[Assistant]:
        """Assistants matching all given filters (metadata by containment), newest first."""
        body = drop_none(
            metadata=metadata,
            graph_id=graph_id,
            name=name,
            limit=limit,
            offset=offset,
            sort_by=sort_by,
            sort_order=sort_order,
            select=list(select) if select is not None else None,
        )
        return await self._http.call(
            Call("POST", "/assistants/search", _many, body=body, idempotent=True)
        )

    async def count(
        self,
        *,
        metadata: Mapping[str, Any] | None = None,
        graph_id: str | None = None,
        name: str | None = None,
    ) -> int:
        """How many assistants match the filters."""
        body = drop_none(metadata=metadata, graph_id=graph_id, name=name)
        return await self._http.call(
            Call("POST", "/assistants/count", parse_int, body=body, idempotent=True)
        )

    async def versions(
        self,
        assistant_id: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[Assistant]:
        """The assistant's versions, newest first (`updated_at` is None on versions)."""
        body = drop_none(metadata=metadata, limit=limit, offset=offset)
        path = f"/assistants/{seg(assistant_id)}/versions"
        return await self._http.call(Call("POST", path, _many, body=body, idempotent=True))

    async def set_latest(self, assistant_id: str, version: int) -> Assistant:
        """Make an earlier version the current one."""
        path = f"/assistants/{seg(assistant_id)}/latest"
        return await self._http.call(
            Call("POST", path, _one, body={"version": version}, idempotent=True)
        )


_one = model(Assistant.from_json)
_many = model_list(Assistant.from_json)
