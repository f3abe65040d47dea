"""`debug` stream events carry the official server's extra keys (contract 6.3), through the
official SDK against a live server (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest
from langgraph_sdk import get_client

from tests.e2e import runs_fixtures
from tests.e2e.runs_fixtures import Live

pytestmark = pytest.mark.e2e
live = runs_fixtures.live


async def test_debug_checkpoints_carry_checkpoint_and_parent_checkpoint(live: Live) -> None:
    client = get_client(url=live.url)
    tid = (await client.threads.create())["thread_id"]
    parts = [
        p
        async for p in client.runs.stream(
            tid, "nested", input={"items": []}, stream_mode=["debug", "checkpoints"]
        )
    ]
    debug = [p.data for p in parts if p.event == "debug"]
    checkpoints = [d["payload"] for d in debug if d["type"] == "checkpoint"]
    assert len(checkpoints) >= 3
    previous = None
    for payload in checkpoints:
        # LangGraph's config / parent_config stay; checkpoint / parent_checkpoint are added
        configurable = payload["config"]["configurable"]
        assert payload["checkpoint"] == {
            "checkpoint_id": configurable["checkpoint_id"],
            "thread_id": tid,
            "checkpoint_ns": "",
        }
        if previous is None:
            assert payload["parent_checkpoint"] is None
            assert payload.get("parent_config") is None
        else:
            assert payload["parent_checkpoint"]["checkpoint_id"] == previous
            assert payload["parent_checkpoint"]["thread_id"] == tid
        previous = configurable["checkpoint_id"]
        for task in payload["tasks"]:
            # a task's state config is replaced by `checkpoint` (a null state stays)
            assert task.get("state") is None
    # the subgraph task's state config became its `checkpoint`
    child_tasks = [t for p in checkpoints for t in p["tasks"] if t["name"] == "child"]
    assert child_tasks and all(t["checkpoint"]["thread_id"] == tid for t in child_tasks)
    # other debug events, and the `checkpoints` mode, are LangGraph's own shapes
    assert all("checkpoint" not in d["payload"] for d in debug if d["type"] != "checkpoint")
    plain = [p.data for p in parts if p.event == "checkpoints"]
    assert plain and all("parent_checkpoint" not in c for c in plain)
    history = await client.threads.get_history(tid, limit=20)
    assert previous == history[0]["checkpoint"]["checkpoint_id"]
