"""CPU per Core statement through `app.db.access`, on PostgreSQL, for the serving engine as
`open_state` makes it and for the two engines it replaced, side by side in one process.

Every domain reads with `read(engine)` and writes with `transaction(engine)`, so SQLAlchemy's
own work per statement (checkout, execution context, parameter and result processing,
check-in) is paid by nearly every request. The variants:

- serving   `create_engine(bounded=True, autocommit=True)`: connections autocommit from
            the pool, no connection-event listener (the server's engine since 8adc96d);
            `read` parks its connection between reads (`app.db.park`)
- unparked  as `serving` with a pool too small to park reads in (2, no overflow): each
            `read` checks a connection out of the pool and back (before parking)
- switched  `create_engine(bounded=True)`: each read switches its connection to
            AUTOCOMMIT and back (before 8adc96d)
- listened  as `switched`, with one connection-event listener on the engine, as the fast
            path's `engine_disposed` listener was before 0c2c95d: SQLAlchemy then
            dispatches every connection event of every statement
- fast      the same SELECT pre-compiled on the serving engine's fast-path executor
            (`app.db.direct.fast_executor`, what the saver and the Store run on): the price
            of SQLAlchemy Core's per-statement machinery is the difference (`read` only)

Operations: `read` (one-row SELECT of a thread by id, the shape of GET /threads/{id}),
`transaction` (that SELECT and an UPDATE in one transaction) and `checkout` (a connection out
of `read()` and back with no statement: what of `read` is the pool and SQLAlchemy's
connection wrapper, each a greenlet hop, rather than the statement; for `serving` the parked
connection; the fast path parks its own connection, so it has no such row). CPU time is this
process's (`time.process_time`); the database server's is not counted. The variants alternate in
rounds; the report gives the median over rounds of each round's mean, and the ratio to
`serving`.

    python bench/core_read_bench.py [--rounds 7] [--statements 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from benchkit import PG_ADMIN_DSN, pg_database
from sqlalchemy import bindparam, event, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

VARIANTS = ("serving", "unparked", "switched", "listened", "fast")
OPS = ("read", "transaction", "checkout")


def _engines(url: str) -> dict[str, AsyncEngine]:
    from app.db.engine import create_engine

    listened = create_engine(url, bounded=True)
    event.listen(listened.sync_engine, "engine_disposed", lambda _engine: None)
    return {
        "serving": create_engine(url, bounded=True, autocommit=True),
        # one connection at a time here, so the pool's size changes nothing else; no overflow,
        # which would count toward the parking budget
        "unparked": create_engine(url, bounded=True, autocommit=True, pool_size=2, max_overflow=0),
        "switched": create_engine(url, bounded=True),
        "listened": listened,
    }


def _fast_read(executor: Any, thread_id: str) -> Callable[[], Awaitable[Any]]:
    """The `read` operation's SELECT, pre-compiled on the fast-path executor."""
    from app.db.tables import threads

    key = {"t": "bench", "i": thread_id}
    by_id = (threads.c.tenant_id == bindparam("t")) & (threads.c.thread_id == bindparam("i"))
    prepared = executor.prepare(select(threads).where(by_id))

    async def read_one() -> None:
        assert await executor.fetch(prepared, key)

    return read_one


def _operations(engine: AsyncEngine, thread_id: str) -> dict[str, Callable[[], Awaitable[Any]]]:
    from app.db.access import read, transaction
    from app.db.tables import threads

    key = {"t": "bench", "i": thread_id}
    by_id = (threads.c.tenant_id == bindparam("t")) & (threads.c.thread_id == bindparam("i"))
    get = select(threads).where(by_id)
    touch = update(threads).where(by_id).values(updated_at=threads.c.updated_at)

    async def read_one() -> None:
        async with read(engine) as conn:
            assert (await conn.execute(get, key)).first() is not None

    async def read_and_write() -> None:
        async with transaction(engine) as conn:
            assert (await conn.execute(get, key)).first() is not None
            await conn.execute(touch, key)

    async def checkout() -> None:
        async with read(engine):
            pass

    return {"read": read_one, "transaction": read_and_write, "checkout": checkout}


async def _cpu_us(op: Callable[[], Awaitable[Any]], count: int) -> float:
    start = time.process_time()
    for _ in range(count):
        await op()
    return (time.process_time() - start) / count * 1e6


async def _run(url: str, rounds: int, count: int) -> dict[str, dict[str, float]]:
    from app.db.types import utcnow
    from app.threads import queries as thread_queries

    engines = _engines(url)
    thread_id = str(uuid.uuid4())
    row = thread_queries.thread_row(
        tenant_id="bench", thread_id=thread_id, metadata={"owner": "bench"}, now=utcnow()
    )
    async with engines["switched"].begin() as conn:
        await conn.execute(thread_queries.INSERT_THREAD, row)
    from app.db.access import close_engine
    from app.db.direct import fast_executor

    ops = {name: _operations(engine, thread_id) for name, engine in engines.items()}
    executor = fast_executor(engines["serving"], closed_by_owner=True)
    try:
        ops["fast"] = {"read": _fast_read(executor, thread_id)}
        samples: dict[str, dict[str, list[float]]] = {
            v: {op: [] for op in ops[v]} for v in VARIANTS
        }
        for variant in VARIANTS:  # warm up: compiled cache, prepared statements, pool
            for op in ops[variant]:
                await _cpu_us(ops[variant][op], 200)
        for rnd in range(rounds):
            order = VARIANTS if rnd % 2 == 0 else VARIANTS[::-1]
            for op in OPS:
                for variant in order:
                    if op in ops[variant]:
                        samples[variant][op].append(await _cpu_us(ops[variant][op], count))
    finally:
        await executor.aclose()
        for engine in engines.values():
            await close_engine(engine)
    return {v: {op: statistics.median(cpu) for op, cpu in samples[v].items()} for v in VARIANTS}


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--statements", type=int, default=3000, help="per variant and round")
    args = parser.parse_args()
    name = f"gk_core_bench_{uuid.uuid4().hex[:8]}"
    await pg_database("create", name)
    url = PG_ADMIN_DSN.rsplit("/", 1)[0] + f"/{name}"  # create_engine picks asyncpg
    try:
        from app.db import migrate
        from app.db.engine import create_engine

        migrating = create_engine(url, null_pool=True)
        try:
            await migrate.upgrade(migrating)
        finally:
            await migrating.dispose()
        result = await _run(url, args.rounds, args.statements)
    finally:
        await pg_database("drop", name)
    print(f"CPU us per unit of work, median of {args.rounds} rounds x {args.statements}")
    print(f"{'variant':<10}" + "".join(f"{op:>14}{'ratio':>8}" for op in OPS))
    for variant in VARIANTS:
        cells = "".join(
            f"{result[variant][op]:>14.1f}{result[variant][op] / result['serving'][op]:>7.2f}x"
            if op in result[variant]
            else f"{'-':>14}{'':>8}"
            for op in OPS
        )
        print(f"{variant:<10}{cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
