"""`graphkeep encryption rotate` rows per second on a generated checkpoint table.

Fills `checkpoint_blobs` of a throwaway PostgreSQL database (or a SQLite file) with N rows
sealed by key A (~300 bytes of state each), then rotates to key B in batches and reports rows
per second and the peak RSS of the process (bounded memory: one batch at a time).

    python bench/encryption_rotate_bench.py --rows 100000
    python bench/encryption_rotate_bench.py --rows 20000 --sqlite
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
from sqlalchemy import insert
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.db import migrate, sealed
from app.db.engine import create_engine
from app.db.sealed import Keyring
from app.db.tables import checkpoint_blobs
from app.ops import encryption

KEY_A = "a" * 32
KEY_B = "b" * 32
PG_ADMIN = os.environ.get(
    "GRAPHKEEP_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
)


async def _admin(sql: str) -> None:
    dsn = make_url(PG_ADMIN).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def fill(url: str, rows: int) -> None:
    engine = create_engine(url)
    old = Keyring.from_keys(KEY_A)
    state = os.urandom(150).hex().encode()  # ~300 bytes
    try:
        await migrate.upgrade(engine)
        chunk = 5000
        for start in range(0, rows, chunk):
            batch = [
                {
                    "tenant_id": "bench",
                    "thread_id": f"t{(start + i) // 100:08d}",
                    "checkpoint_ns": "",
                    "channel": "messages",
                    "version": f"{(start + i) % 100:032d}",
                    "type": "msgpack+gk1",
                    "blob": old.seal_bytes(state),
                }
                for i in range(min(chunk, rows - start))
            ]
            async with engine.begin() as conn:
                await conn.execute(insert(checkpoint_blobs), batch)
    finally:
        await engine.dispose()


async def main(args: argparse.Namespace) -> None:
    name = f"gk_rotate_bench_{uuid.uuid4().hex[:8]}"
    tmp = tempfile.mkdtemp()
    if args.sqlite:
        url = f"sqlite+aiosqlite:///{tmp}/rotate.db"
    else:
        await _admin(f'CREATE DATABASE "{name}"')
        url = PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"
    try:
        started = time.perf_counter()
        await fill(url, args.rows)
        print(f"filled {args.rows} rows in {time.perf_counter() - started:.1f} s", flush=True)
        keyring = Keyring.from_keys(KEY_B, [KEY_A])
        sealed.install(keyring)
        engine = create_engine(url)
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            report = await encryption.rotate(engine, keyring, batch_size=args.batch_size)
            left = (await encryption.status(engine)).totals()
        finally:
            await engine.dispose()
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out = {
            "dialect": "sqlite" if args.sqlite else "postgresql",
            "rows": args.rows,
            "batch_size": args.batch_size,
            **report.to_json(),
            "left": left,
            "peak_rss_mb_before": round(rss_before / 1024, 1),
            "peak_rss_mb_after": round(rss_after / 1024, 1),
        }
        print(json.dumps(out, indent=2))
    finally:
        if not args.sqlite:
            await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--sqlite", action="store_true")
    asyncio.run(main(parser.parse_args()))
