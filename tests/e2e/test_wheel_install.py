"""The built wheel, installed into a fresh venv with constraints.txt (as the Dockerfile does),
migrates and serves on SQLite and PostgreSQL with no source checkout in reach.

An editable install finds alembic/ beside the package; an installed wheel must find its packaged
copy (app/_alembic) and never site-packages/alembic, which is the Alembic library.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import create_pg_database, drop_pg_database
from tests.e2e.api_server import ROOT, clean_env, free_port
from tests.e2e.runs_server import wait_for_ok

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One venv for both dialects: building and installing is most of this module's time."""
    base = tmp_path_factory.mktemp("wheel")
    dist = base / "dist"
    pip_env = {k: v for k, v in os.environ.items() if k != "PIP_REQUIRE_VIRTUALENV"}
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        check=True,
        env=pip_env,
        timeout=300,
    )
    (wheel,) = dist.glob("graphkeep-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        + ["-c", str(ROOT / "constraints.txt"), str(wheel)],
        check=True,
        env=pip_env,
        timeout=600,
    )
    return venv


def _run(venv: Path, cwd: Path, db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    # cwd outside the checkout, no PYTHONPATH: only the installed package can be imported
    env = clean_env(GRAPHKEEP_DATABASE_URL=db_url)
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [str(venv / "bin" / "graphkeep"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _migrate_twice_serve_and_call(venv: Path, cwd: Path, db_url: str) -> None:
    for _ in range(2):  # idempotent: the second run finds the schema at head
        done = _run(venv, cwd, db_url, "migrate")
        assert done.returncode == 0, done.stderr
        assert "database at revision" in done.stdout
    port = free_port()
    env = clean_env(GRAPHKEEP_DATABASE_URL=db_url)
    env.update(GRAPHKEEP_LOG_LEVEL="INFO")
    env.pop("PYTHONPATH", None)
    log = cwd / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(venv / "bin" / "graphkeep"), "serve", "--port", str(port)],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_ok(proc, f"{url}/ok", lambda: log.read_text(errors="replace"))
        assert httpx.get(f"{url}/ready", timeout=10).status_code == 200
        found = httpx.post(f"{url}/assistants/search", json={}, timeout=10)
        assert found.status_code == 200, found.text
        assert {"agent", "approval", "memory"} <= {a["graph_id"] for a in found.json()}
    finally:
        proc.terminate()
        proc.wait(30)
    assert "Traceback" not in log.read_text(errors="replace")


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Path]:
    assert not (tmp_path / "alembic").exists()
    yield tmp_path


def test_wheel_carries_its_migrations_and_not_the_checkout(wheel_venv: Path, outside: Path) -> None:
    probe = (
        "import app, app.db.migrate as m, pathlib; "
        "print(pathlib.Path(app.__file__).parent); "
        "print(m.alembic_config().get_main_option('script_location'))"
    )
    done = subprocess.run(
        [str(wheel_venv / "bin" / "python"), "-c", probe],
        cwd=outside,
        env={k: v for k, v in clean_env().items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    package, scripts = done.stdout.split()
    assert package.startswith(str(wheel_venv)), package
    assert scripts == str(Path(package) / "_alembic")


def test_wheel_migrates_and_serves_on_sqlite(wheel_venv: Path, outside: Path) -> None:
    _migrate_twice_serve_and_call(wheel_venv, outside, f"sqlite+aiosqlite:///{outside / 'gk.db'}")


@pytest.mark.postgres
def test_wheel_migrates_and_serves_on_postgres(wheel_venv: Path, outside: Path) -> None:
    db_url = create_pg_database("gk_wheel")
    try:
        _migrate_twice_serve_and_call(wheel_venv, outside, db_url)
    finally:
        drop_pg_database(db_url)
