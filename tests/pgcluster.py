"""Throwaway PostgreSQL clusters for tests: initdb into a temporary directory, start on a free
loopback port, stop, start again.

Used by the outage tests (the system's PostgreSQL binaries) and by the pgvector tests (the
PostgreSQL 16 + pgvector build bundled in the `pgserver` wheel, a dev extra).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def system_pg_bin() -> Path | None:
    """The newest system PostgreSQL server binaries (initdb, pg_ctl), if any."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name)
    )
    for directory in reversed(candidates):
        if (Path(directory) / "initdb").exists() and (Path(directory) / "pg_ctl").exists():
            return Path(directory)
    found = shutil.which("pg_ctl")
    return Path(found).parent if found else None


def pgserver_install(root: Path) -> Path:
    """The bin directory of pgserver's bundled PostgreSQL (with pgvector).

    As root the server runs as the `postgres` user, which may not read the site-packages
    copy (under /root): the install tree is then copied below `root`, readable by everyone.
    Raises ImportError when pgserver is not installed.
    """
    # located, not imported: importing pgserver runs its own server machinery
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("pgserver is not installed")
    package = Path(next(iter(spec.submodule_search_locations))).resolve()
    if os.geteuid() != 0:
        return package / "pginstall" / "bin"
    # the binaries find their shared libraries at $ORIGIN/../../../pgserver.libs (auditwheel)
    shutil.copytree(package / "pginstall", root / "pgserver" / "pginstall", symlinks=True)
    shutil.copytree(package.parent / "pgserver.libs", root / "pgserver.libs", symlinks=True)
    for path in [root / "pgserver", root / "pgserver.libs", *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        extra = stat.S_IRGRP | stat.S_IROTH
        if path.is_dir() or mode & stat.S_IXUSR:
            extra |= stat.S_IXGRP | stat.S_IXOTH
        path.chmod(mode | extra)
    root.chmod(root.stat().st_mode | stat.S_IXOTH | stat.S_IROTH)
    return root / "pgserver" / "pginstall" / "bin"


class Cluster:
    """A private PostgreSQL cluster: initdb, start, stop -m immediate, start again."""

    def __init__(self, bindir: Path, root: Path, port: int) -> None:
        self.bindir, self.root, self.port = bindir, root, port
        self.data = root / "data"
        self.as_postgres = os.geteuid() == 0  # initdb refuses to run as root

    def _run(self, *args: str, timeout: float = 60) -> None:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=timeout)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def init(self) -> None:
        if self.as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
            "--locale=C",
        )  # fmt: skip

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} "
            "-c fsync=off -c full_page_writes=off"
        )
        log = self.root / "postgres.log"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(log), "-w", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def stop_quietly(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass  # already stopped

    def remove(self) -> None:
        self.stop_quietly()
        shutil.rmtree(self.root, ignore_errors=True)

    def log(self) -> str:
        try:
            return (self.root / "postgres.log").read_text(errors="replace")
        except OSError:
            return ""


ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def serve_on_cluster(
    url: str, log: Path, **settings: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Migrate the database at `url`, then run `graphkeep serve` on it (JSON logs into `log`,
    `GRAPHKEEP_*` taken from `settings` only) until it answers /ok; SIGTERM it at the end."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHKEEP_")}
    env.update(
        {f"GRAPHKEEP_{k.upper()}": v for k, v in settings.items()},
        GRAPHKEEP_DATABASE_URL=url,
        GRAPHKEEP_LOG_FORMAT="json",
        PYTHONUNBUFFERED="1",
    )
    cli = [sys.executable, "-m", "app.cli"]
    subprocess.run([*cli, "migrate"], env=env, cwd=ROOT, check=True, timeout=120)
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*cli, "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(f"{base}/ok", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield base, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
