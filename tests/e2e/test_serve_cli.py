"""`graphkeep serve` start-up: clean refusals on a schema that is behind or a bad config."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.conftest import create_pg_database, drop_pg_database
from tests.e2e.api_server import clean_env, graphkeep, serve

pytestmark = pytest.mark.e2e


@pytest.mark.postgres
def test_postgres_behind_head_refuses_naming_migrate(tmp_path: Path) -> None:
    db_url = create_pg_database("gk_e2e_behind")  # empty: no schema at all
    try:
        env = clean_env(GRAPHKEEP_DATABASE_URL=db_url)
        done = graphkeep("serve", "--port", "0", env=env, timeout=60)
        assert done.returncode == 2
        assert "graphkeep migrate" in done.stderr
        assert "Traceback" not in done.stderr
    finally:
        drop_pg_database(db_url)


def test_bad_config_stops_start_naming_the_entry(tmp_path: Path) -> None:
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"mybot": "./missing.py:graph"}}))
    env = clean_env(GRAPHKEEP_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'gk.db'}")
    done = graphkeep("serve", "--port", "0", "--config", str(config), env=env, timeout=60)
    assert done.returncode == 2
    assert "'mybot'" in done.stderr and "not found" in done.stderr
    assert "Traceback" not in done.stderr


def test_invalid_settings_stop_start_without_echoing_them() -> None:
    # a pool too small for the listener and the workers' liveness lock: refused at start, the
    # reason named, the database URL (its password) never printed
    env = clean_env(
        GRAPHKEEP_DATABASE_URL="postgresql+asyncpg://gk:pw-must-not-show@127.0.0.1:1/gk",
        GRAPHKEEP_DB_POOL_SIZE="2",
        GRAPHKEEP_DB_MAX_OVERFLOW="0",
    )
    done = graphkeep("serve", "--port", "0", env=env, timeout=60)
    assert done.returncode == 2
    assert "db_pool_size + db_max_overflow must be at least 3" in done.stderr
    assert "pw-must-not-show" not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
    done = graphkeep("serve", env=clean_env(GRAPHKEEP_WORKERS="-1"), timeout=60)
    assert done.returncode == 2 and "invalid configuration: workers" in done.stderr


def test_serve_with_config_relative_paths(tmp_path: Path) -> None:
    (tmp_path / "graphs").mkdir()
    (tmp_path / "graphs" / "mine.py").write_text(
        "from app.examples.approval import builder\ngraph = builder.compile()\n"
    )
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"mine": "./graphs/mine.py:graph"}}))
    with serve(
        f"sqlite+aiosqlite:///{tmp_path / 'gk.db'}", tmp_path / "serve.log", "--config", str(config)
    ) as url:
        found = httpx.post(f"{url}/assistants/search", json={}).json()
        assert [a["graph_id"] for a in found] == ["mine"]
