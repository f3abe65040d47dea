"""A small connection pool: the smallest one a process can run on serves it (the fast path's
parked connections never starve it), a smaller one is refused at start with the reason
(PostgreSQL: SQLite's pool has no size and nothing held for life)."""

from __future__ import annotations

import httpx
import pytest
from pydantic import ValidationError

from app.config import Settings
from app.db.park import PARK_MAX, ParkLimits, park_limits
from app.main import create_app


def test_park_limits_leave_the_long_held_and_half_the_rest() -> None:
    # (pool size, max overflow) -> (fast path, reads)
    expected = {
        (1, 0): (0, 0),
        (2, 0): (0, 0),
        (3, 0): (0, 0),
        (4, 0): (1, 0),
        (6, 0): (1, 1),
        (10, 0): (2, 2),
        (3, 2): (1, 0),
        (10, 10): (4, 4),  # the server's defaults
        (50, 0): (4, 4),
    }
    for (size, overflow), parks in expected.items():
        limits = park_limits(size, overflow)
        assert (limits.fast, limits.reads) == parks, (size, overflow)
        # the two held for life, and at least half of the rest, stay free
        assert limits.fast + limits.reads <= max(0, (size + overflow - 2) // 2)
    # an engine whose reads do not park (not the serving one) gives the fast path the budget
    assert park_limits(10, 0, reads=False) == ParkLimits(fast=4, reads=0)
    assert park_limits(4, 0, reads=False) == ParkLimits(fast=1, reads=0)
    assert park_limits(None) == ParkLimits(fast=PARK_MAX, reads=0)


@pytest.mark.parametrize(("workers", "smallest"), [(0, 2), (2, 3)])
def test_a_pool_too_small_for_the_process_is_refused(workers: int, smallest: int) -> None:
    url = "postgresql+asyncpg://u@127.0.0.1:1/x"
    with pytest.raises(ValidationError, match=f"must be at least {smallest}"):
        Settings(database_url=url, workers=workers, db_pool_size=smallest - 1, db_max_overflow=0)
    Settings(database_url=url, workers=workers, db_pool_size=smallest, db_max_overflow=0)
    # SQLite holds nothing for life
    Settings(database_url="sqlite+aiosqlite:///x.db", db_pool_size=1, db_max_overflow=0)


@pytest.mark.postgres
@pytest.mark.parametrize("pool_size", [3, 4])
async def test_the_smallest_pools_serve_threads_and_runs(pg_url: str, pool_size: int) -> None:
    # a pool of 2 with workers had every request wait out the checkout timeout (503): the
    # listener and the liveness lock held one each and the fast path parked the rest
    settings = Settings(
        database_url=pg_url,
        db_pool_size=pool_size,
        db_max_overflow=0,
        db_timeout_seconds=5,
        workers=2,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=60) as c:
            for _ in range(3):
                r = await c.post("/threads", json={})
                assert r.status_code == 200, r.text
                thread_id = r.json()["thread_id"]
                assert (await c.get(f"/threads/{thread_id}")).status_code == 200
            for text in ("one", "two"):
                r = await c.post(
                    f"/threads/{thread_id}/runs/wait",
                    json={
                        "assistant_id": "agent",
                        "input": {"messages": [{"role": "user", "content": text}]},
                    },
                )
                assert r.status_code == 200, r.text
                assert r.json()["messages"][-1]["content"] == f"You said: {text}"
            r = await c.post(f"/threads/{thread_id}/history", json={"limit": 5})
            assert r.status_code == 200, r.text
            assert len(r.json()) == 5
