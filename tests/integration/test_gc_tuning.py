"""The serving process's garbage-collector settings: app/main.py `tune_garbage_collector`,
called by `serve` (the app's lifespan) and by `worker`.

Checked in a fresh interpreter: the test session itself has started many apps, and the
settings are made once per process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent(
    """
    import asyncio, gc, json, sys

    from app.config import Settings
    from app.main import YOUNG_COLLECTION_THRESHOLD, create_app

    async def main() -> None:
        if len(sys.argv) > 2:  # as a graph module may, before the app starts
            gc.set_threshold(int(sys.argv[2]), *gc.get_threshold()[1:])
        before = gc.get_threshold()
        app = create_app(Settings(database_url=sys.argv[1]))
        async with app.router.lifespan_context(app):
            during = gc.get_threshold()
            frozen = gc.get_freeze_count()
        print(json.dumps({"before": before, "during": during, "frozen": frozen,
                          "young": YOUNG_COLLECTION_THRESHOLD}))

    asyncio.run(main())
    """
)


def _probe(sqlite_url: str, *preset: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, sqlite_url, *preset],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_serving_process_freezes_its_start_up_heap_and_collects_young_objects_less_often(
    sqlite_url: str,
) -> None:
    got = _probe(sqlite_url)
    assert got["frozen"] > 10_000  # the start-up heap is out of the collector's reach
    assert got["before"][0] == 700  # CPython's default, so the next line shows our change
    assert got["during"] == [got["young"], *got["before"][1:]]
    assert got["young"] > got["before"][0]


def test_a_higher_threshold_set_before_start_is_kept(sqlite_url: str) -> None:
    got = _probe(sqlite_url, "50000")
    assert got["before"][0] == 50_000
    assert got["during"] == got["before"]
