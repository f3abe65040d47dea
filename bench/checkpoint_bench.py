"""SQLSaver vs langgraph's official savers, side by side in one process.

PostgreSQL: SQLSaver vs AsyncPostgresSaver (psycopg pool of the same size), each in its own
throwaway database on the same server. SQLite: SQLSaver vs AsyncSqliteSaver, each in its own
temporary file. Prints medians and ratios (ratio > 1: SQLSaver is faster / smaller).

    python bench/checkpoint_bench.py                 # full run
    python bench/checkpoint_bench.py --short         # fewer repetitions, same depths
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from sqlalchemy import event, text
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.checkpoint import SQLSaver, make_serde
from app.db import migrate
from app.db.engine import create_engine
from app.db.portable import PortableExecutor

Config = dict[str, Any]
BENCH_KEY = "base64:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="  # 32 bytes, bench only


# --------------------------------------------------------------------------- savers


async def _admin(admin_url: str, sql: str) -> None:
    dsn = make_url(admin_url).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@asynccontextmanager
async def pg_database(admin_url: str, prefix: str) -> AsyncIterator[str]:
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    await _admin(admin_url, f'CREATE DATABASE "{name}"')
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        await _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@asynccontextmanager
async def our_saver(
    url: str, pool: int, key: str | None = None, portable: bool = False
) -> AsyncIterator[SQLSaver]:
    # at most `pool` connections, like the official saver's pool (max_size=pool): overflow
    # connections would also be opened and closed per operation at 32 threads
    engine = create_engine(url, pool_size=pool, max_overflow=0)
    await migrate.upgrade(engine)
    # portable: the same statements on SQLAlchemy Core (app/db/portable.py) instead of the
    # fast path (app/db/direct.py)
    executor = PortableExecutor(engine) if portable else None
    try:
        yield SQLSaver(engine, serde=make_serde(key), executor=executor)
    finally:
        await engine.dispose()


@asynccontextmanager
async def official_pg(url: str, pool: int) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with AsyncConnectionPool(conninfo, max_size=pool, kwargs=kwargs, open=False) as cp:
        saver = AsyncPostgresSaver(cp)  # type: ignore[arg-type]
        await saver.setup()
        yield saver


@asynccontextmanager
async def official_sqlite(path: str) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        await saver.setup()
        yield saver


# --------------------------------------------------------------------------- workload


def state(step: int) -> tuple[dict[str, Any], dict[str, str]]:
    """A chat-like state: growing messages (new version each step), a counter, a 2 KB
    config blob that never changes after step 0."""
    messages = [{"role": "user", "content": f"message {i} " + "x" * 80} for i in range(step % 20)]
    values = {"messages": messages, "step": step, "settings": {"blob": "s" * 2000}}
    versions = {"messages": f"{step + 1:032}.0", "step": f"{step + 1:032}.0", "settings": "1"}
    return values, versions


async def put_step(saver: Any, config: Config, step: int) -> Config:
    values, versions = state(step)
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6(clock_seq=step))
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = versions
    new = dict(versions) if step == 0 else {k: v for k, v in versions.items() if k != "settings"}
    metadata: Any = {"source": "loop", "step": step, "parents": {}}
    return dict(await saver.aput(config, checkpoint, metadata, new))


async def build_thread(saver: Any, thread_id: str, depth: int) -> list[Config]:
    config: Config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    configs = []
    for step in range(depth):
        config = await put_step(saver, config, step)
        configs.append(config)
    return configs


async def build_delta_thread(saver: Any, thread_id: str, steps: int, frequency: int) -> Config:
    """A DeltaChannel thread shaped as langgraph writes it (see the tests' put_chain)."""
    expected: list[str] = []
    config: Config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    for i in range(steps):
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=i))
        version = f"{i + 1:032}.0"
        checkpoint["channel_versions"] = {"messages": version}
        if i and i % frequency == 0:
            checkpoint["channel_values"] = {"messages": _DeltaSnapshot(list(expected))}
        metadata: Any = {
            "source": "loop",
            "step": i,
            "parents": {},
            "counters_since_delta_snapshot": {"messages": [i % frequency, i % frequency]},
        }
        config = dict(await saver.aput(config, checkpoint, metadata, {"messages": version}))
        message = f"message {i} " + "y" * 60
        await saver.aput_writes(config, [("messages", [message])], str(uuid.uuid4()), "~step")
        expected.append(message)
    return config


async def timed_pair(
    ours: Callable[[], Awaitable[Any]], theirs: Callable[[], Awaitable[Any]], repeat: int
) -> tuple[float, float]:
    """Median seconds of `repeat` calls of each, alternating, so load from other processes
    on the machine hits both savers alike."""
    wall: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for side, fn in enumerate((ours, theirs)):
            started = time.perf_counter()
            await fn()
            wall[side].append(time.perf_counter() - started)
    return statistics.median(wall[0]), statistics.median(wall[1])


async def thread_bytes(saver: Any, thread_id: str) -> int:
    """Bytes stored for one thread, over every checkpoint table of the saver."""
    if isinstance(saver, SQLSaver):
        tables = ["checkpoints", "checkpoint_blobs", "checkpoint_writes"]
        async with saver.engine.connect() as conn:
            return sum([await _table_bytes_sa(conn, t, thread_id) for t in tables])
    if hasattr(saver, "jsonplus_serde"):  # AsyncSqliteSaver
        total = 0
        for table in ("checkpoints", "writes"):
            async with saver.conn.execute(f"PRAGMA table_info({table})") as cur:
                columns = [row[1] async for row in cur]
            expr = " + ".join(f"coalesce(length({c}), 0)" for c in columns)
            sql = f"SELECT sum({expr}) FROM {table} WHERE thread_id = ?"
            async with saver.conn.execute(sql, (thread_id,)) as cur:
                total += int((await cur.fetchone())[0] or 0)
        return total
    total = 0
    async with saver.conn.connection() as conn:
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            cur = await conn.execute(
                f"SELECT sum(pg_column_size(t.*)) AS n FROM {table} t WHERE thread_id = %s",
                (thread_id,),
            )
            total += int((await cur.fetchone())["n"] or 0)
    return total


async def _table_bytes_sa(conn: Any, table: str, thread_id: str) -> int:
    if conn.dialect.name == "postgresql":
        sql = f"SELECT sum(pg_column_size(t.*)) FROM {table} t WHERE thread_id = :t"
    else:
        columns = [row[1] for row in await conn.execute(text(f"PRAGMA table_info({table})"))]
        expr = " + ".join(f"coalesce(length({c}), 0)" for c in columns)
        sql = f"SELECT sum({expr}) FROM {table} WHERE thread_id = :t"
    return int((await conn.execute(text(sql), {"t": thread_id})).scalar() or 0)


async def throughput(saver: Any, workers: int, seconds: float) -> float:
    """Cycles/s (put + put_writes + get latest) with `workers` concurrent graph threads."""
    stop = time.perf_counter() + seconds
    done = 0

    async def worker() -> None:
        nonlocal done
        config: Config = {"configurable": {"thread_id": uuid.uuid4().hex, "checkpoint_ns": ""}}
        step = 0
        while time.perf_counter() < stop:
            config = await put_step(saver, config, step)
            await saver.aput_writes(config, [("messages", {"n": step})], uuid.uuid4().hex)
            await saver.aget_tuple(
                {"configurable": {**config["configurable"], "checkpoint_id": None}}
            )
            step += 1
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    return done / (time.perf_counter() - started)


# --------------------------------------------------------------------------- the run


class Probe:
    """One saver's state during a run: its own thread ids and cursors."""

    def __init__(self, saver: Any, run: str) -> None:
        self.saver = saver
        self.run = run
        self.config: Config = {"configurable": {"thread_id": f"put-{run}", "checkpoint_ns": ""}}
        self.step = 0
        self.configs: dict[int, list[Config]] = {}

    async def put(self) -> None:
        self.config = await put_step(self.saver, self.config, self.step)
        self.step += 1

    async def put_writes(self) -> None:
        writes = [("messages", {"content": "w" * 200}), ("step", 1)]
        await self.saver.aput_writes(self.config, writes, uuid.uuid4().hex, "~n")

    def latest(self, depth: int) -> Config:
        return {"configurable": {"thread_id": f"d{depth}-{self.run}", "checkpoint_ns": ""}}

    async def list_all(self, depth: int) -> None:
        async for _ in self.saver.alist(self.latest(depth)):
            pass


async def put_rounds(ours: Any, theirs: Any, rounds: int, per_round: int) -> None:
    """Put steadiness: `rounds` rounds of `per_round` sequential puts on one thread, the two
    savers alternating round by round; per round puts/s, p95, max, the garbage collections
    (generation 2) that fell in it and, for SQLSaver, its pool checkouts (1 per round: the
    parked connection served every put), then the spread (min-max puts/s) of each side."""
    gen2 = [0]
    checkouts = [0]

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            gen2[0] += 1

    def checked_out(*_: Any) -> None:
        checkouts[0] += 1

    gc.callbacks.append(count)
    pool = ours.engine.sync_engine.pool
    event.listen(pool, "checkout", checked_out)
    run = uuid.uuid4().hex[:8]
    probes = (Probe(ours, f"steady-{run}"), Probe(theirs, f"steady-{run}"))
    per_side: tuple[list[float], list[float]] = ([], [])
    p95s: tuple[list[float], list[float]] = ([], [])
    print(f"  put steadiness: {rounds} rounds x {per_round} puts (ours | official)")
    try:
        for number in range(rounds):
            line = []
            for side, probe in enumerate(probes):
                gen2[0] = checkouts[0] = 0
                samples = []
                started = time.perf_counter()
                for _ in range(per_round):
                    t0 = time.perf_counter()
                    await probe.put()
                    samples.append(time.perf_counter() - t0)
                rate = per_round / (time.perf_counter() - started)
                p95 = statistics.quantiles(samples, n=20)[-1] * 1000
                per_side[side].append(rate)
                p95s[side].append(p95)
                cell = f"{rate:7.0f}/s p95 {p95:5.2f}ms max {max(samples) * 1000:6.1f}ms"
                cell += f" gc2 {gen2[0]}" + (f" checkouts {checkouts[0]}" if side == 0 else "")
                line.append(cell)
            print(f"    round {number + 1:2}: " + " | ".join(line), flush=True)
    finally:
        gc.callbacks.remove(count)
        event.remove(pool, "checkout", checked_out)
    for side, name in enumerate(("ours", "official")):
        rates = per_side[side]
        mid = statistics.median(rates)
        print(
            f"  {name}: puts/s min {min(rates):.0f} median {mid:.0f} "
            f"max {max(rates):.0f} (spread {(max(rates) - min(rates)) / mid:.0%}); "
            f"p95 median {statistics.median(p95s[side]):.2f}ms"
        )


async def measure(
    ours: Any, theirs: Any, args: argparse.Namespace
) -> tuple[dict[str, float], dict[str, float]]:
    run = uuid.uuid4().hex[:8]
    a, b = Probe(ours, run), Probe(theirs, run)
    out: tuple[dict[str, float], dict[str, float]] = ({}, {})

    def record(name: str, pair: tuple[float, float]) -> None:
        out[0][name], out[1][name] = pair

    print("  put / put_writes", flush=True)
    record("put", await timed_pair(a.put, b.put, args.repeat))
    record("put_writes", await timed_pair(a.put_writes, b.put_writes, args.repeat))
    for depth in args.depths:
        print(f"  building depth {depth}", flush=True)
        for probe in (a, b):
            probe.configs[depth] = await build_thread(probe.saver, f"d{depth}-{run}", depth)
    # every depth inside each sample round, so depth ratios are not skewed by load drifting
    print("  get latest / get by id", flush=True)
    samples: dict[str, tuple[list[float], list[float]]] = {}
    for _ in range(args.repeat):
        for depth in args.depths:
            target = random.randrange(depth)
            for kind, calls in (
                ("get_latest", (a.latest(depth), b.latest(depth))),
                ("get_id", (a.configs[depth][target], b.configs[depth][target])),
            ):
                pair = samples.setdefault(f"{kind}@{depth}", ([], []))
                for side, probe in enumerate((a, b)):
                    started = time.perf_counter()
                    await probe.saver.aget_tuple(calls[side])
                    pair[side].append(time.perf_counter() - started)
    for name, (mine, other) in samples.items():
        record(name, (statistics.median(mine), statistics.median(other)))
    for depth in args.depths:
        if depth >= 1000:
            print(f"  list {depth}", flush=True)
            record(
                f"list@{depth}",
                await timed_pair(
                    lambda d=depth: a.list_all(d),
                    lambda d=depth: b.list_all(d),
                    max(1, args.repeat // 20),
                ),
            )
    print("  delta history", flush=True)
    for label, frequency in (("snapshot every 100", 100), ("no snapshot", 1000)):
        heads = [
            await build_delta_thread(p.saver, f"delta{frequency}-{run}", 1000, frequency)
            for p in (a, b)
        ]
        record(
            f"delta@1000 ({label})",
            await timed_pair(
                lambda h=heads[0]: a.saver.aget_delta_channel_history(
                    config=h, channels=["messages"]
                ),
                lambda h=heads[1]: b.saver.aget_delta_channel_history(
                    config=h, channels=["messages"]
                ),
                max(5, args.repeat // 5),
            ),
        )
    for steps in (200, 1000):
        for side, probe in enumerate((a, b)):
            thread = f"bytes{steps}-{run}"
            await build_delta_thread(probe.saver, thread, steps, 100)
            out[side][f"bytes/step@{steps}"] = await thread_bytes(probe.saver, thread) / steps
    for workers in args.concurrency:
        print(f"  {workers} concurrent threads", flush=True)
        rates: tuple[list[float], list[float]] = ([], [])
        for _ in range(2):  # alternate, half the time each, twice
            for side, probe in enumerate((a, b)):
                rates[side].append(await throughput(probe.saver, workers, args.seconds / 2))
        out[0][f"cycles/s@{workers}"] = statistics.mean(rates[0])
        out[1][f"cycles/s@{workers}"] = statistics.mean(rates[1])
    return out


def delta_round_trips(saver: SQLSaver, head: Config) -> Callable[[], Awaitable[int]]:
    async def count() -> int:
        seen: list[str] = []

        def record(_c: Any, _cu: Any, statement: str, *_: Any) -> None:
            if not statement.startswith("BEGIN"):
                seen.append(statement)

        event.listen(saver.engine.sync_engine, "before_cursor_execute", record)
        try:
            await saver.aget_delta_channel_history(config=head, channels=["messages"])
        finally:
            event.remove(saver.engine.sync_engine, "before_cursor_execute", record)
        return len(seen)

    return count


def report(title: str, ours: dict[str, float], theirs: dict[str, float]) -> None:
    print(f"\n{title}")
    print(f"{'metric':<34}{'SQLSaver':>12}{'official':>12}{'ratio':>9}")
    for key, mine in ours.items():
        other = theirs.get(key, float("nan"))
        if key.startswith("cycles/s"):
            ratio = mine / other
            print(f"{key:<34}{mine:>12.0f}{other:>12.0f}{ratio:>8.2f}x")
        elif key.startswith("bytes"):
            print(f"{key:<34}{mine:>12.0f}{other:>12.0f}{other / mine:>8.2f}x")
        else:
            print(f"{key:<34}{mine * 1e3:>10.2f}ms{other * 1e3:>10.2f}ms{other / mine:>8.2f}x")
    print("derived (SQLSaver / official):")
    for name, data in (("SQLSaver", ours), ("official", theirs)):
        depths = sorted(int(k.split("@")[1]) for k in data if k.startswith("get_id@"))
        lo, hi = depths[0], depths[-1]
        parts = [
            f"get_id {hi}/{lo} = {data[f'get_id@{hi}'] / data[f'get_id@{lo}']:.2f}",
            f"get_latest {hi}/{lo} = {data[f'get_latest@{hi}'] / data[f'get_latest@{lo}']:.2f}",
        ]
        lists = sorted(int(k.split("@")[1]) for k in data if k.startswith("list@"))
        if len(lists) >= 2:
            a, b = lists[0], lists[-1]
            per = (data[f"list@{b}"] / b) / (data[f"list@{a}"] / a)
            parts.append(f"list per-checkpoint {b}/{a} = {per:.2f}")
        conc = sorted(int(k.split("@")[1]) for k in data if k.startswith("cycles/s@"))
        if len(conc) >= 2 and 1 in conc:
            parts += [
                f"{w} thr / 1 thr = {data[f'cycles/s@{w}'] / data['cycles/s@1']:.2f}"
                for w in conc[1:]
            ]
        parts.append(
            f"bytes/step 1000/200 = {data['bytes/step@1000'] / data['bytes/step@200']:.2f}"
        )
        print(f"  {name}: " + "; ".join(parts))


async def main(args: argparse.Namespace) -> None:
    random.seed(7)
    if not args.skip_postgres:
        async with AsyncExitStack() as stack:
            ours_url = await stack.enter_async_context(
                pg_database(args.pg_admin_url, "gk_bench_ours")
            )
            theirs_url = await stack.enter_async_context(
                pg_database(args.pg_admin_url, "gk_bench_official")
            )
            print("PostgreSQL", flush=True)
            # --encryption: ours with a key, theirs the same saver without one
            key = BENCH_KEY if args.encryption else None
            ours_saver = await stack.enter_async_context(our_saver(ours_url, args.pool, key))
            theirs_saver = await stack.enter_async_context(
                our_saver(theirs_url, args.pool)
                if args.encryption
                else our_saver(theirs_url, args.pool, portable=True)
                if args.portable
                else official_pg(theirs_url, args.pool)
            )

            if args.rounds:
                await put_rounds(ours_saver, theirs_saver, args.rounds, args.round_puts)
                return
            ours, theirs = await measure(ours_saver, theirs_saver, args)
            head = await build_delta_thread(ours_saver, "rt-check", 50, 1000)
            trips = await delta_round_trips(ours_saver, head)()
            report(
                "PostgreSQL: SQLSaver with a key vs without"
                if args.encryption
                else "PostgreSQL: SQLSaver fast path vs SQLSaver on Core (portable)"
                if args.portable
                else "PostgreSQL: SQLSaver vs AsyncPostgresSaver",
                ours,
                theirs,
            )
            print(f"  SQLSaver delta history statements: {trips}")
    if not args.skip_sqlite:
        with tempfile.TemporaryDirectory() as tmp:
            print("SQLite", flush=True)
            key = BENCH_KEY if args.encryption else None
            other = (
                our_saver(f"sqlite+aiosqlite:///{tmp}/plain.db", args.pool)
                if args.encryption
                else our_saver(f"sqlite+aiosqlite:///{tmp}/core.db", args.pool, portable=True)
                if args.portable
                else official_sqlite(os.path.join(tmp, "official.db"))
            )
            async with (
                our_saver(f"sqlite+aiosqlite:///{tmp}/ours.db", args.pool, key) as saver,
                other as official,
            ):
                ours, theirs = await measure(saver, official, args)
            report(
                "SQLite: SQLSaver with a key vs without"
                if args.encryption
                else "SQLite: SQLSaver fast path vs SQLSaver on Core (portable)"
                if args.portable
                else "SQLite: SQLSaver vs AsyncSqliteSaver",
                ours,
                theirs,
            )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--pg-admin-url",
        default=os.environ.get(
            "GRAPHKEEP_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
        ),
        help="PostgreSQL URL with CREATE DATABASE rights (throwaway databases are made there)",
    )
    parser.add_argument("--repeat", type=int, default=200, help="samples per latency metric")
    parser.add_argument(
        "--depths",
        type=int,
        nargs="+",
        default=[10, 1000, 5000],
        help="history depths for get/list",
    )
    parser.add_argument(
        "--concurrency", type=int, nargs="+", default=[1, 8, 32], help="concurrent graph threads"
    )
    parser.add_argument(
        "--seconds", type=float, default=5.0, help="duration of each throughput run"
    )
    parser.add_argument("--pool", type=int, default=10, help="connection pool size for both savers")
    parser.add_argument("--short", action="store_true", help="60 samples, 2 s throughput runs")
    parser.add_argument(
        "--portable",
        action="store_true",
        help="SQLSaver's fast path against the same saver on SQLAlchemy Core (app/db/portable.py)",
    )
    parser.add_argument(
        "--rounds", type=int, default=0, help="only put steadiness: this many rounds (PostgreSQL)"
    )
    parser.add_argument("--round-puts", type=int, default=300, help="puts per steadiness round")
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument(
        "--encryption",
        action="store_true",
        help="SQLSaver with GRAPHKEEP_ENCRYPTION_KEY's cipher against SQLSaver without a key",
    )
    args = parser.parse_args(argv)
    if args.short:
        args.repeat, args.seconds = 60, 2.0
    return args


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
