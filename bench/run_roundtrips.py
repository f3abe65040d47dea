"""Database round trips and socket sends per fresh-thread runs/wait, counted, not timed.

One in-process server (httpx ASGI transport: no HTTP sockets, so every socket send counted is
a database one) with in-process workers, PostgreSQL, the echo graph. After a warm-up it runs
`--runs` times "POST /threads, then POST /threads/{id}/runs/wait" from `--clients` concurrent
clients under cProfile and prints, per run, the calls of asyncpg's Python entry points
(connection.py / prepared_stmt.py: executions of prepared statements and simple queries) and
of socket send (asyncpg writes each exchange in one send: the round trips). asyncpg's Cython
protocol methods are invisible to cProfile, hence these. Call counts do not depend on load.

    python bench/run_roundtrips.py [--runs 50] [--clients 1] [--pool-size 0] [--top 0] [--sql]
                                   [--by-package]

`--sql` also lists the statements sent per run (asyncpg's Python entry points wrapped while the
profile runs), so a count can be tied to the code that sends it.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import json
import pstats
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchkit import ECHO_GRAPH, pg_database

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/{db}"
# asyncpg entry points, one round trip each: a prepared statement's execution (fetch, execute,
# executemany of connection.py / prepared_stmt.py), a simple query (execute without arguments:
# BEGIN, COMMIT, NOTIFY) and a statement's first parse
COUNTED = ("_do_execute", "__do_execute", "_executemany", "execute", "_get_statement")


SENT: list[str] = []  # --sql: statement texts sent while profiling


def _record_statements() -> None:
    import functools

    import asyncpg.connection
    import asyncpg.prepared_stmt

    def wrap(cls: type, name: str, text: Callable[[Any, tuple[Any, ...]], str | None]) -> None:
        original = getattr(cls, name)

        @functools.wraps(original)
        async def recorded(self: Any, *args: Any, **kwargs: Any) -> Any:
            if RECORDING:
                sql = text(self, args)
                if sql:
                    SENT.append(" ".join(sql.split())[:140])
            return await original(self, *args, **kwargs)

        setattr(cls, name, recorded)

    wrap(asyncpg.connection.Connection, "_do_execute", lambda _s, a: a[0])
    # a simple query (no arguments): BEGIN, COMMIT, SET, NOTIFY
    wrap(asyncpg.connection.Connection, "execute", lambda _s, a: a[0] if len(a) == 1 else None)
    wrap(
        asyncpg.prepared_stmt.PreparedStatement,
        "_PreparedStatement__do_execute",
        lambda s, _a: s._query,
    )


RECORDING = False


async def _measure(
    db: str,
    runs: int,
    top: int,
    clients: int,
    sort: str,
    pool_size: int = 0,
    workers: int = 0,
    by_package: bool = False,
) -> dict[str, float]:
    global RECORDING
    import httpx

    from app.config import Settings
    from app.db import migrate
    from app.db.engine import create_engine
    from app.main import create_app

    url = PG_URL.format(db=db)
    engine = create_engine(url, pool_size=1, max_overflow=0)
    await migrate.upgrade(engine)
    await engine.dispose()
    tmp = Path(tempfile.mkdtemp())
    (tmp / "echo_graph.py").write_text(ECHO_GRAPH)
    config = tmp / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"echo": str(tmp / "echo_graph.py") + ":graph"}}))
    settings = Settings(
        database_url=url,
        workers=workers or clients,
        db_pool_size=pool_size or 4 + clients // 4,
        db_max_overflow=0,
        config_file=config,
    )
    app = create_app(settings)
    body = {"assistant_id": "echo", "input": {"text": "x"}}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:

            async def one() -> None:
                tid = (await client.post("/threads", json={})).json()["thread_id"]
                r = await client.post(f"/threads/{tid}/runs/wait", json=body)
                assert r.status_code == 200 and r.json() == {"text": "x"}, r.text

            for _ in range(20):  # warm up: imports, compiled caches, prepared statements
                await one()
            profile = cProfile.Profile()
            RECORDING = True
            profile.enable()
            await asyncio.gather(*[_client(one, runs // clients) for _ in range(clients)])
            profile.disable()
            RECORDING = False
    stats = pstats.Stats(profile)
    counts: dict[str, float] = {}
    for (file, _line, name), (_cc, calls, *_rest) in stats.stats.items():  # type: ignore[attr-defined]
        if (
            "asyncpg" in file
            and name in COUNTED
            or name == "<method 'send' of '_socket.socket' objects>"
        ):
            key = "socket.send" if "socket" in name else f"{Path(file).stem}.{name}"
            counts[key] = round(counts.get(key, 0) + calls / runs, 2)
    if top:
        stats.sort_stats(sort).print_stats(top)
    if by_package:
        _print_by_package(stats, runs)
    return counts


def _package(file: str) -> str:
    """The package a profiled function belongs to: site-packages/<name>, app/<domain>, or stdlib."""
    if "site-packages/" in file:
        return file.split("site-packages/", 1)[1].split("/", 1)[0]
    if f"{ROOT}/app/" in file:
        return "app/" + file.split(f"{ROOT}/app/", 1)[1].split("/", 1)[0].removesuffix(".py")
    if file.startswith("~") or file.startswith("<"):
        return "builtins"
    return "stdlib/" + Path(file).stem if "asyncio" not in file else "stdlib/asyncio"


def _print_by_package(stats: pstats.Stats, runs: int) -> None:
    """Own time (tottime) per run summed by package: where the CPU of a run goes."""
    totals: collections.Counter[str] = collections.Counter()
    for (file, _line, _name), (_cc, _calls, tottime, *_rest) in stats.stats.items():  # type: ignore[attr-defined]
        totals[_package(file)] += tottime
    whole = sum(totals.values())
    print(f"own time per run under the profiler: {1000 * whole / runs:.2f} ms")
    for package, seconds in totals.most_common(25):
        print(f"{1000 * seconds / runs:7.3f} ms  {100 * seconds / whole:5.1f} %  {package}")


async def _client(one: Callable[[], Any], count: int) -> None:
    for _ in range(count):
        await one()


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--top", type=int, default=0, help="also print the cProfile top N")
    parser.add_argument(
        "--clients", type=int, default=1, help="concurrent clients (and in-process workers)"
    )
    parser.add_argument(
        "--pool-size", type=int, default=0, help="server DB pool (0: 4 + clients / 4)"
    )
    parser.add_argument(
        "--workers", type=int, default=0, help="in-process workers (0: one per client)"
    )
    parser.add_argument("--sort", default="tottime", help="cProfile order for --top")
    parser.add_argument("--sql", action="store_true", help="also list statements per run")
    parser.add_argument(
        "--by-package", action="store_true", help="also print own CPU time per run by package"
    )
    args = parser.parse_args()
    if args.sql:
        _record_statements()
    db = f"gk_rt_{uuid.uuid4().hex[:8]}"
    await pg_database("create", db)
    try:
        args.runs -= args.runs % args.clients
        counts = await _measure(
            db,
            args.runs,
            args.top,
            args.clients,
            args.sort,
            args.pool_size,
            args.workers,
            args.by_package,
        )
    finally:
        await pg_database("drop", db)
    print(json.dumps({"per_run": counts}, indent=1))
    for sql, n in collections.Counter(SENT).most_common():
        print(f"{n / args.runs:6.2f}  {sql}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
