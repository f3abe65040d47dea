"""TTL with a controlled clock: expiry is immediate for reads, refresh on read, the sweep."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.tables import store_items
from app.errors import InvalidInput
from app.store import SQLStore, parse_ttl_config


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += timedelta(minutes=minutes)


async def _rows(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(store_items))).scalar())


async def test_expired_items_are_invisible_before_any_sweep(engine: AsyncEngine) -> None:
    clock = Clock()
    store = SQLStore(engine, clock=clock)
    await store.aput(("t",), "short", {"v": 1}, ttl=1)
    await store.aput(("t",), "long", {"v": 2}, ttl=10)
    await store.aput(("t",), "forever", {"v": 3})
    clock.advance(1.5)
    assert await store.aget(("t",), "short") is None
    assert [i.key for i in await store.asearch(("t",))] == ["forever", "long"]
    assert await store.alist_namespaces() == [("t",)]
    assert await _rows(engine) == 3  # still stored, only hidden
    assert await store.sweep_expired() == 1
    assert await _rows(engine) == 2
    clock.advance(20)
    assert [i.key for i in await store.asearch(("t",))] == ["forever"]
    assert await store.sweep_expired() == 1
    assert await store.sweep_expired() == 0


async def test_namespace_with_only_expired_items_is_not_listed(engine: AsyncEngine) -> None:
    clock = Clock()
    store = SQLStore(engine, clock=clock)
    await store.aput(("gone",), "k", {"v": 1}, ttl=1)
    await store.aput(("kept",), "k", {"v": 1})
    clock.advance(2)
    assert await store.alist_namespaces() == [("kept",)]


async def test_refresh_on_read_pushes_expiry_back(engine: AsyncEngine) -> None:
    clock = Clock()
    store = SQLStore(engine, clock=clock, ttl={"refresh_on_read": True})
    await store.aput(("t",), "get", {"v": 1}, ttl=10)
    await store.aput(("t",), "search", {"v": 2}, ttl=10)
    await store.aput(("t",), "norefresh", {"v": 3}, ttl=10)
    clock.advance(8)
    assert await store.aget(("t",), "get") is not None  # refreshed: now expires at 18
    assert len(await store.asearch(("t",), filter={"v": 2})) == 1  # refreshed too
    assert await store.aget(("t",), "norefresh", refresh_ttl=False) is not None
    clock.advance(8)  # minute 16
    assert await store.aget(("t",), "norefresh") is None
    assert await store.aget(("t",), "get") is not None
    assert await store.aget(("t",), "search") is not None


async def test_refresh_on_read_false_by_config(engine: AsyncEngine) -> None:
    clock = Clock()
    store = SQLStore(engine, clock=clock, ttl={"refresh_on_read": False})
    await store.aput(("t",), "k", {"v": 1}, ttl=10)
    clock.advance(8)
    assert await store.aget(("t",), "k") is not None  # no refresh by default
    clock.advance(3)
    assert await store.aget(("t",), "k") is None


async def test_default_ttl_applies_and_none_overrides(engine: AsyncEngine) -> None:
    clock = Clock()
    store = SQLStore(engine, clock=clock, ttl={"default_ttl": 5})
    await store.aput(("t",), "default", {"v": 1})
    await store.aput(("t",), "explicit", {"v": 2}, ttl=60)
    await store.aput(("t",), "none", {"v": 3}, ttl=None)
    clock.advance(6)
    assert await store.aget(("t",), "default") is None
    assert await store.aget(("t",), "explicit") is not None
    assert await store.aget(("t",), "none") is not None


async def test_put_renews_expiry_and_tenant_views_share_the_clock(engine: AsyncEngine) -> None:
    clock = Clock()
    store = SQLStore(engine, clock=clock).for_tenant("acme")
    await store.aput(("t",), "k", {"v": 1}, ttl=5)
    clock.advance(4)
    await store.aput(("t",), "k", {"v": 2}, ttl=5)
    clock.advance(4)
    item = await store.aget(("t",), "k", refresh_ttl=False)
    assert item is not None and item.value == {"v": 2}


@pytest.mark.parametrize(
    "raw",
    [
        {"default_ttl": -1},
        {"default_ttl": "5"},
        {"refresh_on_read": "yes"},
        {"sweep_interval_minutes": 0},
        {"unknown": 1},
    ],
)
def test_bad_ttl_config_is_rejected(raw: dict[str, object]) -> None:
    with pytest.raises(InvalidInput):
        parse_ttl_config(raw)


def test_ttl_config_parses() -> None:
    assert parse_ttl_config({"default_ttl": 30, "sweep_interval_minutes": 5}) == {
        "refresh_on_read": True,
        "default_ttl": 30.0,
        "sweep_interval_minutes": 5,
    }
