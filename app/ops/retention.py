"""Retention sweepers: thread TTL, stream-event expiry and Store TTL.

Thread TTL follows langgraph.json's `checkpointer.ttl` (`strategy` delete | keep_latest,
`default_ttl` minutes, `sweep_interval_minutes`) and each thread's own `ttl` (the
`threads.ttl_minutes / ttl_strategy / expires_at` columns the threads API writes):

- a thread with no TTL of its own gets the configured default, stamped once as
  `expires_at = updated_at + default_ttl`, so every later decision reads one indexed column;
- `delete` removes an expired thread with its runs, stream events and checkpoints;
- `keep_latest` prunes its checkpoints through the saver's `aprune(strategy="keep_latest")`,
  which keeps the latest checkpoint of each namespace and every ancestor its DeltaChannels
  still need, then re-arms `expires_at` one TTL ahead (renewed activity is pruned again one
  TTL later; an idle thread costs one no-op prune per TTL);
- a busy thread (a run in progress) is never touched; it is retried at the next sweep;
- the thread-stream log follows both: deleted with the thread, trimmed to its newest run by
  `keep_latest` (app/runs/threadlog/retention.py), and older runs' events expire after the
  stream-event retention like classic resumable events.

Every sweep is idempotent, so several processes may run them at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app import metrics
from app.db.access import read, transaction
from app.db.types import utcnow
from app.errors import InvalidInput
from app.ops import queries

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
# The thread-stream log lives in app.runs, a sibling layer: its trims come in as callables
# (app/main.py wires app/runs/threadlog/retention.py).
LogTrim = Callable[[str, str], Awaitable[int]]  # (tenant_id, thread_id) -> rows removed
LogSweep = Callable[[datetime], Awaitable[int]]  # cutoff -> rows removed
STRATEGIES = ("delete", "keep_latest")
BATCH_SIZE = 200


@dataclass(frozen=True)
class ThreadTTLPolicy:
    """langgraph.json `checkpointer.ttl`, validated."""

    strategy: str = "delete"
    default_ttl_minutes: float | None = None
    sweep_interval_minutes: float | None = None


def parse_checkpointer_ttl(raw: Mapping[str, Any] | None) -> ThreadTTLPolicy:
    """Validate `checkpointer.ttl`; a bad value raises InvalidInput naming the key."""
    if not raw:
        return ThreadTTLPolicy()
    unknown = set(raw) - {"strategy", "default_ttl", "sweep_interval_minutes"}
    if unknown:
        raise InvalidInput(f"checkpointer.ttl: unknown keys {sorted(unknown)}")
    strategy = raw.get("strategy", "delete")
    if strategy not in STRATEGIES:
        raise InvalidInput(f"checkpointer.ttl.strategy must be one of {list(STRATEGIES)}")
    values: dict[str, float | None] = {}
    for key in ("default_ttl", "sweep_interval_minutes"):
        value = raw.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
        ):
            raise InvalidInput(f"checkpointer.ttl.{key} must be a positive number of minutes")
        values[key] = None if value is None else float(value)
    return ThreadTTLPolicy(
        strategy=str(strategy),
        default_ttl_minutes=values["default_ttl"],
        sweep_interval_minutes=values["sweep_interval_minutes"],
    )


@dataclass
class ThreadSweep:
    """What one thread sweep did."""

    stamped: int = 0
    deleted: int = 0
    pruned: int = 0


async def stamp_default_ttl(engine: AsyncEngine, policy: ThreadTTLPolicy) -> int:
    """Give threads without a TTL the configured default (expires_at = updated_at + ttl)."""
    if policy.default_ttl_minutes is None:
        return 0
    ttl = timedelta(minutes=policy.default_ttl_minutes)
    stamped = 0
    while True:
        async with transaction(engine) as conn:
            rows = (await conn.execute(queries.threads_without_ttl(BATCH_SIZE))).all()
            for row in rows:
                await conn.execute(
                    queries.stamp_ttl(
                        row.tenant_id,
                        row.thread_id,
                        ttl_minutes=policy.default_ttl_minutes,
                        strategy=policy.strategy,
                        expires_at=row.updated_at + ttl,
                    )
                )
        stamped += len(rows)
        if len(rows) < BATCH_SIZE:
            return stamped


async def _expired(engine: AsyncEngine, now: datetime) -> list[Any]:
    async with read(engine) as conn:
        return list((await conn.execute(queries.expired_threads(now, BATCH_SIZE))).all())


async def _delete_thread(engine: AsyncEngine, saver: Any, row: Any, now: datetime) -> bool:
    # Guarded on expiry and status in the same statement, so a thread that got a run (or a
    # new TTL) since it was selected survives. Thread, runs, events and checkpoints go in one
    # transaction (as DELETE /threads/{id}): a crash mid-sweep leaves no orphaned checkpoints.
    async with transaction(engine) as conn:
        stmt = queries.delete_expired_thread(row.tenant_id, row.thread_id, now)
        gone = (await conn.execute(stmt)).first()
        if gone is None:
            return False
        # runs go with the thread (FK ON DELETE CASCADE); events carry no FK
        for events in queries.delete_thread_events(row.tenant_id, row.thread_id):
            await conn.execute(events)
        await saver.for_tenant(row.tenant_id).adelete_threads_in(conn, [str(row.thread_id)])
    return True


async def _prune_thread(
    engine: AsyncEngine, saver: Any, row: Any, now: datetime, trim_log: LogTrim | None
) -> None:
    await saver.for_tenant(row.tenant_id).aprune([str(row.thread_id)], strategy="keep_latest")
    if trim_log is not None:
        await trim_log(row.tenant_id, str(row.thread_id))
    # Re-arm one TTL ahead; a bare expires_at (no ttl_minutes) is a one-off.
    rearm = now + timedelta(minutes=float(row.ttl_minutes)) if row.ttl_minutes else None
    async with transaction(engine) as conn:
        await conn.execute(queries.rearm_ttl(row.tenant_id, row.thread_id, now, rearm))


async def sweep_threads(
    engine: AsyncEngine,
    saver: Any,
    policy: ThreadTTLPolicy,
    *,
    now: datetime,
    trim_log: LogTrim | None = None,
) -> ThreadSweep:
    """Apply thread TTLs expired at `now` (delete or keep_latest per thread)."""
    result = ThreadSweep(stamped=await stamp_default_ttl(engine, policy))
    seen: set[tuple[str, str]] = set()
    while True:
        rows = [r for r in await _expired(engine, now) if (r.tenant_id, r.thread_id) not in seen]
        if not rows:
            return result
        for row in rows:
            seen.add((row.tenant_id, row.thread_id))
            strategy = row.ttl_strategy or policy.strategy
            if strategy == "keep_latest":
                await _prune_thread(engine, saver, row, now, trim_log)
                result.pruned += 1
            elif await _delete_thread(engine, saver, row, now):
                result.deleted += 1


async def sweep_run_events(engine: AsyncEngine, *, now: datetime) -> int:
    """Delete stream events whose retention ended (expires_at is set when their run ends)."""
    async with transaction(engine) as conn:
        result = await conn.execute(queries.expired_run_events(now))
    return int(result.rowcount or 0)


async def sweep_store(store: Any) -> int:
    """Delete expired Store items (every tenant)."""
    started = time.perf_counter()
    removed = int(await store.sweep_expired())
    metrics.observe_store_operation("sweep", time.perf_counter() - started)
    return removed


# --------------------------------------------------------------------------- loops


async def _timed(name: str, sweep: Callable[[], Awaitable[None]]) -> None:
    started = time.perf_counter()
    failed = False
    try:
        await sweep()
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a failed sweep (database down) is retried next interval
        failed = True
        log.warning("retention sweep failed", extra={"sweep": name, "error": type(exc).__name__})
    finally:
        metrics.observe_retention_sweep(time.perf_counter() - started, failed=failed)


async def run_periodically(
    name: str, sweep: Callable[[], Awaitable[None]], interval_seconds: float
) -> None:
    """Run `sweep` now and then every `interval_seconds` until cancelled; never raises."""
    while True:
        await _timed(name, sweep)
        await asyncio.sleep(interval_seconds)


@dataclass(frozen=True)
class Sweepers:
    """The three sweeps bound to their components, with their intervals."""

    engine: AsyncEngine
    saver: Any
    store: Any
    policy: ThreadTTLPolicy
    default_interval_seconds: float
    store_interval_seconds: float | None = None
    clock: Clock = utcnow
    trim_log: LogTrim | None = None  # keep_latest trims the thread-stream log too
    sweep_log: LogSweep | None = None  # expires older runs' thread-stream events
    # ... this long after they were written (None: never)
    thread_log_retention_seconds: float | None = None

    @property
    def thread_interval_seconds(self) -> float:
        minutes = self.policy.sweep_interval_minutes
        return minutes * 60 if minutes else self.default_interval_seconds

    async def threads_once(self) -> ThreadSweep:
        """One thread TTL sweep."""
        done = await sweep_threads(
            self.engine, self.saver, self.policy, now=self.clock(), trim_log=self.trim_log
        )
        metrics.count_retention_removed("threads_deleted", done.deleted)
        metrics.count_retention_removed("threads_pruned", done.pruned)
        if done.deleted or done.pruned:
            log.info("thread ttl sweep", extra={"deleted": done.deleted, "pruned": done.pruned})
        return done

    async def run_events_once(self) -> int:
        """One stream-event expiry sweep (classic run events, then the thread-stream log)."""
        now = self.clock()
        removed = await sweep_run_events(self.engine, now=now)
        metrics.count_retention_removed("run_events", removed)
        if self.sweep_log is not None and self.thread_log_retention_seconds is not None:
            cutoff = now - timedelta(seconds=self.thread_log_retention_seconds)
            trimmed = await self.sweep_log(cutoff)
            metrics.count_retention_removed("thread_events", trimmed)
        return removed

    async def store_once(self) -> int:
        """One Store TTL sweep."""
        removed = await sweep_store(self.store) if self.store is not None else 0
        metrics.count_retention_removed("store_items", removed)
        return removed

    def loops(self) -> dict[str, Awaitable[None]]:
        """The periodic tasks to start (named), each owning its own interval."""

        async def threads_sweep() -> None:
            await self.threads_once()

        async def events_sweep() -> None:
            await self.run_events_once()

        async def store_sweep() -> None:
            await self.store_once()

        store_interval = self.store_interval_seconds or self.default_interval_seconds
        return {
            "gk-retention-threads": run_periodically(
                "threads", threads_sweep, self.thread_interval_seconds
            ),
            "gk-retention-run-events": run_periodically(
                "run_events", events_sweep, self.default_interval_seconds
            ),
            "gk-retention-store": run_periodically("store", store_sweep, store_interval),
        }


def build_sweepers(
    *,
    engine: AsyncEngine,
    saver: Any,
    store: Any,
    checkpointer_ttl: Mapping[str, Any] | None,
    sweep_interval_seconds: float,
    stream_event_retention_seconds: float | None = None,
    trim_log: LogTrim | None = None,
    sweep_log: LogSweep | None = None,
) -> Sweepers:
    """Sweepers from langgraph.json (`checkpointer.ttl`, the Store's `ttl`) and settings."""
    store_ttl = getattr(store, "ttl_config", None) or {}
    store_minutes = store_ttl.get("sweep_interval_minutes")
    return Sweepers(
        engine=engine,
        saver=saver,
        store=store,
        policy=parse_checkpointer_ttl(checkpointer_ttl),
        default_interval_seconds=sweep_interval_seconds,
        store_interval_seconds=float(store_minutes) * 60 if store_minutes else None,
        thread_log_retention_seconds=stream_event_retention_seconds,
        trim_log=trim_log,
        sweep_log=sweep_log,
    )
