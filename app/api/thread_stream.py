"""`GET /threads/{thread_id}/stream` (contract section 6.6): a thread's run events and state
updates over SSE, live or resumed after a `Last-Event-ID`."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Annotated
from urllib.parse import urlencode

from fastapi import Header, Query
from fastapi.responses import StreamingResponse

from app import metrics
from app.api.deps import AppStateDep, PrincipalDep
from app.api.routing import resource_router
from app.api.sse import HEARTBEAT, SSE_HEADERS, SSE_MEDIA_TYPE, format_event, requested_modes
from app.errors import ValidationFailed
from app.runs.thread_stream import (
    THREAD_STREAM_MODES,
    StateUpdateEvents,
    ThreadStream,
    keep_event,
    parse_thread_last_event_id,
)
from app.state import AppState

router = resource_router("threads")


def thread_stream_modes(values: list[str]) -> frozenset[str]:
    """Repeated keys, a comma-separated list or a JSON array; none means `run_modes`."""
    modes = requested_modes(values)
    unknown = sorted(modes - set(THREAD_STREAM_MODES))
    if unknown:
        raise ValidationFailed(
            f"Invalid stream mode: {', '.join(unknown)}; allowed: {', '.join(THREAD_STREAM_MODES)}"
        )
    return frozenset(modes or {"run_modes"})


@router.get("/threads/{thread_id}/stream", operation_id="join_thread_stream")
async def join_thread_stream(
    thread_id: str,
    state: AppStateDep,
    principal: PrincipalDep,
    stream_mode: Annotated[list[str] | None, Query()] = None,
    stream_modes: Annotated[list[str] | None, Query()] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> StreamingResponse:
    """Every event of the thread's runs (current and later ones), `metadata` with
    `{"status": "run_done"}` when a run ends, and `state_update` after update_state.
    Every event has an id; the stream stays open until the client leaves."""
    try:
        thread_id = str(uuid.UUID(thread_id))
    except ValueError:
        raise ValidationFailed(f"thread_id: {thread_id!r} is not a valid UUID") from None
    after = parse_thread_last_event_id(last_event_id)
    modes = thread_stream_modes([*(stream_mode or []), *(stream_modes or [])])
    reader = ThreadStream(
        state.runs.hub,
        state.engine,
        tenant_id=principal.tenant_id,
        thread_id=thread_id,
        after=after,
    )
    await reader.check()

    async def body() -> AsyncIterator[bytes]:
        metrics.stream_subscribed()
        try:
            async for ev in reader.events():
                if ev is None:
                    yield HEARTBEAT
                elif keep_event(ev.event, modes):
                    yield format_event(ev.event, ev.data, ev.id)
        finally:
            metrics.stream_unsubscribed()

    # A dropped connection reconnects here (the SDK sends its last id, not the query).
    query = urlencode({"stream_mode": ",".join(sorted(modes))})
    headers = {**SSE_HEADERS, "Location": f"/threads/{thread_id}/stream?{query}"}
    return StreamingResponse(body(), media_type=SSE_MEDIA_TYPE, headers=headers)


class StateUpdates(StateUpdateEvents):
    """`state_update` events for the API's update_state / supersteps (app/runs/thread_stream)."""

    def __init__(self, state: AppState, tenant_id: str) -> None:
        super().__init__(state.runs.hub, tenant_id)
