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
    sizes = (1, 2, 3, 4, 6, 10, 12, 50)
    limits = [park_limits(n) for n in sizes]
    assert [(p.fast, p.reads) for p in limits] == [
        (0, 0),
        (0, 0),
        (0, 0),
        (1, 0),
        (1, 1),
        (2, 2),
        (3, 2),
        (4, 4),
    ]
    for n, p in zip(sizes, limits, strict=True):
        assert p.fast + p.reads <= max(0, (n - 2) // 2)  # the held two and half the rest free
    assert park_limits(None) == ParkLimits(fast=PARK_MAX, reads=0)  # SQLite: reads never park


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
