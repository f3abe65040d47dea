"""pyproject.toml bounds every dependency whose internals graphkeep uses, and the versions CI
installs (constraints.txt, the running environment) fit every declared range."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
# The internals graphkeep cannot avoid, each bounded to the minor CI tested:
# - aiosqlite: the SQLite fast path runs a whole unit in its worker thread (app/db/direct.py);
# - sqlalchemy, asyncpg: the fast path's drivers (app/db/direct.py, app/db/driver_errors.py);
# - fastapi: the flat route table (app/api/routing.py) relies on how the router matches;
# - langgraph-sdk: custom auth reads the `Auth` object's registered handlers, which the SDK
#   exposes only as attributes its server reads (app/auth/custom.py `registered`), and a graph
#   factory's `runtime` argument is the SDK's `_ExecutionRuntime` / `_ReadRuntime` (the public
#   `ServerRuntime` is only their type alias; graphs check the class, as langgraph's own SDK
#   suite's factory graph does; app/graphs/registry.py);
# - langgraph: the strict-resume config key (app/runs/resume.py, langgraph._internal).
INTERNALS_USED = {"sqlalchemy", "asyncpg", "aiosqlite", "fastapi", "langgraph-sdk", "langgraph"}


def _requirements() -> dict[str, Requirement]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {canonicalize_name(r.name): r for r in map(Requirement, deps)}


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        name, sep, pinned = line.strip().partition("==")
        if sep:
            pins[canonicalize_name(name)] = pinned
    return pins


def test_libraries_whose_internals_we_use_have_an_upper_bound() -> None:
    reqs = _requirements()
    for name in INTERNALS_USED:
        uppers = [s for s in reqs[name].specifier if s.operator in ("<", "<=", "~=", "==")]
        assert uppers, f"{name} needs an upper bound in pyproject.toml"


def test_installed_and_pinned_versions_fit_the_declared_ranges() -> None:
    pins = _pins()
    for name, req in _requirements().items():
        assert name in pins, f"{name} is not pinned in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (name, pins[name])
        assert req.specifier.contains(version(name), prereleases=True), (name, version(name))
