"""The official langgraph_sdk's `select` (state, history) and `extract` (thread search) against
a live `graphkeep serve` on PostgreSQL: the shapes the client gets back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import UnprocessableEntityError

from tests.e2e.api_server import serve_on_new_pg_database

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp: Path = tmp_path_factory.mktemp("sdk_select")
    with serve_on_new_pg_database("gk_e2e_select", tmp / "serve.log") as url:
        yield url


async def test_select_and_extract_through_the_sdk(server_url: str) -> None:
    client = get_client(url=server_url)
    thread = await client.threads.create(graph_id="approval", metadata={"tags": ["a", "b"]})
    tid = thread["thread_id"]
    first = await client.threads.update_state(tid, {"request": "one"}, as_node="propose")
    await client.threads.update_state(tid, {"request": "two"}, as_node="propose")

    state = await client.threads.get_state(tid, select=["values.request", "next"])
    assert state == {"values": {"request": "two"}, "next": ["review"]}
    older = await client.threads.get_state(
        tid, checkpoint=first["checkpoint"], select=["values", "checkpoint"]
    )
    assert older == {"values": {"request": "one"}, "checkpoint": first["checkpoint"]}
    history = await client.threads.get_history(tid, limit=5, select=["values.request"])
    assert history == [{"values": {"request": "two"}}, {"values": {"request": "one"}}]
    with pytest.raises(UnprocessableEntityError):
        await client.threads.get_state(tid, select=["nope"])

    found = await client.threads.search(
        ids=[tid],
        select=["thread_id"],
        extract={"request": "values.request", "last_tag": "metadata.tags[-1]"},
    )
    assert found == [{"thread_id": tid, "extracted": {"request": "two", "last_tag": "b"}}]


def test_select_with_the_sync_client(server_url: str) -> None:
    client = get_sync_client(url=server_url)
    tid = client.threads.create(graph_id="approval")["thread_id"]
    client.threads.update_state(tid, {"request": "x"}, as_node="propose")
    assert client.threads.get_state(tid, select=["next"]) == {"next": ["review"]}
    (item,) = client.threads.get_history(tid, limit=1, select=["values.request", "metadata"])
    assert item["values"] == {"request": "x"} and item["metadata"]["source"] == "update"
