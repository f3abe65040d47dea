"""Fixtures shared by the run-engine e2e tests: one live server per dialect per module."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import _migrate, create_pg_database, drop_pg_database
from tests.e2e.runs_server import Proc, serve


@dataclass
class Live:
    url: str
    db_url: str
    dialect: str
    record: Path
    tmp: Path
    proc: Proc

    def records(self, tag: str) -> list[str]:
        return [node for node, _pid in read_records(self.record, tag)]


def read_records(path: Path, tag: str) -> list[tuple[str, int]]:
    """(node, pid) for every execution recorded under `tag`, in order."""
    if not path.exists():
        return []
    prefix = f"{tag}:"
    out: list[tuple[str, int]] = []
    for line in path.read_text().splitlines():
        if line.startswith(prefix):
            node, _, pid = line[len(prefix) :].partition("@")
            out.append((node, int(pid)))
    return out


def fresh_database(dialect: str, tmp: Path) -> str:
    if dialect == "postgres":
        url = create_pg_database("gk_runs_e2e")
        asyncio.run(_migrate(url))
        return url
    return f"sqlite+aiosqlite:///{tmp / 'runs.db'}"


@pytest.fixture(
    scope="module",
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    dialect = str(request.param)
    tmp = tmp_path_factory.mktemp(f"runs_{dialect}")
    db_url = fresh_database(dialect, tmp)
    record = tmp / "record.txt"
    try:
        with serve(db_url, tmp, workers=4, record_file=record) as proc:
            assert proc.url is not None
            yield Live(proc.url, db_url, dialect, record, tmp, proc)
    finally:
        if dialect == "postgres":
            drop_pg_database(db_url)
