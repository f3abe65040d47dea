"""Thread delete: the thread row, its runs and its checkpoints go in one transaction."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.tables import checkpoints, threads
from app.threads.service import ThreadService
from tests.integration.apiclient import api_client
from tests.integration.test_api_threads import add_checkpoint, app_state, count_rows, new_thread


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(db_url) as c:
        yield c


async def approval_thread(client: httpx.AsyncClient, *requests: str) -> str:
    tid = (await new_thread(client, metadata={"graph_id": "approval"}))["thread_id"]
    for r in requests:
        await add_checkpoint(client, tid, r)
    return tid


class _FailingCheckpointDelete:
    """The server's saver, except that deleting checkpoints fails (after the thread rows
    were deleted in the same transaction)."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver

    def for_tenant(self, tenant_id: str) -> _FailingCheckpointDelete:
        return self

    async def adelete_threads_in(self, conn: AsyncConnection, thread_ids: Sequence[str]) -> None:
        raise RuntimeError("checkpoint delete failed")


async def test_thread_delete_is_one_transaction(client: httpx.AsyncClient) -> None:
    state = app_state(client)
    tid = await approval_thread(client, "a", "b")
    with pytest.raises(RuntimeError, match="checkpoint delete failed"):
        failing = ThreadService(
            engine=state.engine, graphs=state.graphs, saver=_FailingCheckpointDelete(state.saver)
        )
        await failing.delete_thread(tenant_id="default", thread_id=tid)
    # rolled back: the thread and its checkpoints are all still there
    assert await count_rows(client, threads, tid) == 1
    assert await count_rows(client, checkpoints, tid) == 2
    assert (await client.get(f"/threads/{tid}/state")).json()["values"] == {"request": "b"}

    assert (await client.delete(f"/threads/{tid}")).status_code == 204
    assert await count_rows(client, threads, tid) == 0
    assert await count_rows(client, checkpoints, tid) == 0
    assert (await client.delete(f"/threads/{uuid.uuid4()}")).status_code == 404
