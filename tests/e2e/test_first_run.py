"""What a newcomer sees from `graphkeep serve` and the examples.

The first lines say where the server, its docs, its database and its graphs are; text and JSON
logs carry no terminal escape codes (uvicorn's `color_message`); readiness probes log nothing;
a `store.index.dims` the embedder does not return stops start-up with one line naming it; an
example run with no server prints one line, not a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.e2e.api_server import ROOT, clean_env, free_port, graphkeep
from tests.e2e.runs_server import wait_for_ok

pytestmark = pytest.mark.e2e

EXAMPLE_GRAPHS = "agent,approval,fanout,memory,long_conversation"
ESCAPES = ("\x1b", "\\u001b", "color_message")


@contextmanager
def serve_at_info(tmp_path: Path, log_format: str) -> Iterator[tuple[str, Path]]:
    port = free_port()
    env = clean_env(GRAPHKEEP_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'gk.db'}")
    env.update(GRAPHKEEP_LOG_LEVEL="INFO", GRAPHKEEP_LOG_FORMAT=log_format)
    log = tmp_path / f"serve-{log_format}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_ok(proc, f"{url}/ok", lambda: log.read_text(errors="replace"))
        yield url, log
    finally:
        proc.terminate()
        proc.wait(30)


def _probe_ready(url: str, log: Path) -> str:
    """Two readiness probes, then the log once it holds both access lines: the access line
    is written after the response went out, so a client can see its answer first."""
    for _ in range(2):
        assert httpx.get(f"{url}/ready", timeout=10).status_code == 200
    deadline = time.monotonic() + 10
    text = log.read_text()
    while text.count("/ready") < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
        text = log.read_text()
    return text


def test_text_start_up_lines_say_where_everything_is(tmp_path: Path) -> None:
    with serve_at_info(tmp_path, "text") as (url, log):
        text = _probe_ready(url, log)
    assert "graphkeep serving version=" in text
    assert f"url={url} docs={url}/docs" in text
    assert f"database kind=sqlite file={tmp_path / 'gk.db'}" in text
    assert f"graphs loaded graph_ids={EXAMPLE_GRAPHS}" in text
    for escape in ESCAPES:
        assert escape not in text, escape
    # the upgrade of the embedded file is logged; alembic's per-connection chatter is not,
    # so the two readiness probes added no line at all
    assert "Running upgrade" in text
    assert "Context impl" not in text and "Will assume" not in text
    after_start = text.split("graphs loaded", 1)[1].splitlines()[1:]
    probes = [line for line in after_start if "route=/ready" in line]
    assert len(probes) == 2  # each probe: its one access line, nothing else
    assert all("graphkeep.access" in line for line in after_start), after_start


def test_json_logs_are_clean_json_with_the_start_up_fields(tmp_path: Path) -> None:
    with serve_at_info(tmp_path, "json") as (url, log):
        lines = _probe_ready(url, log).splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    assert len(records) == len(lines)  # every line is one JSON object
    for line in lines:
        for escape in ESCAPES:
            assert escape not in line, line
    serving = next(r for r in records if r["message"] == "graphkeep serving")
    assert serving["url"] == url and serving["docs"] == f"{url}/docs"
    database = next(r for r in records if r["message"] == "database")
    assert database["kind"] == "sqlite"
    graphs = next(r for r in records if r["message"] == "graphs loaded")
    assert graphs["graph_ids"] == EXAMPLE_GRAPHS
    assert not [
        r for r in records if r["logger"].startswith("alembic") and "Context" in r["message"]
    ]


def test_store_index_dims_mismatch_stops_start_up_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "emb.py").write_text("def embed(texts):\n    return [[0.5] * 12 for _ in texts]\n")
    config = tmp_path / "langgraph.json"
    config.write_text(
        json.dumps(
            {
                "graphs": {"agent": "app.examples.chat:graph"},
                "store": {"index": {"dims": 10, "embed": "./emb.py:embed"}},
            }
        )
    )
    env = clean_env(GRAPHKEEP_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'gk.db'}")
    done = graphkeep("serve", "--port", "0", "--config", str(config), env=env, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "store.index.dims is 10" in lines[0] and "returns 12-dimensional" in lines[0]

    # the matching value starts (nothing else changed)
    config.write_text(config.read_text().replace('"dims": 10', '"dims": 12'))
    with_right_dims = subprocess.run(
        [sys.executable, "-c", _CHECK_STARTUP, str(config), str(tmp_path / "gk.db")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert with_right_dims.returncode == 0, with_right_dims.stderr


_CHECK_STARTUP = """
import asyncio, sys
from pathlib import Path
from app.config import Settings
from app.main import check_startup
asyncio.run(check_startup(Settings(
    config_file=Path(sys.argv[1]), database_url=f"sqlite+aiosqlite:///{sys.argv[2]}"
)))
"""


@pytest.mark.parametrize(
    "script", ["chat.py", "approve_interrupt.py", "fork_from_history.py", "remember_fact.py"]
)
def test_example_without_a_server_prints_one_line(script: str) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), "--url", url],
        cwd=ROOT / "examples",
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert url in lines[0] and "./scripts/serve" in lines[0]
