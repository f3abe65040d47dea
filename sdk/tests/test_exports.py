"""The public surface: __all__ is exactly the public names, and Client / AsyncClient match."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import graphkeep_client
from graphkeep_client import AsyncClient, Client

SDK = Path(__file__).resolve().parent.parent


def test_all_matches_the_public_names() -> None:
    public = {name for name in dir(graphkeep_client) if not name.startswith("_")}
    assert set(graphkeep_client.__all__) - {"__version__"} == public
    assert len(graphkeep_client.__all__) == len(set(graphkeep_client.__all__))
    for name in graphkeep_client.__all__:
        assert getattr(graphkeep_client, name) is not None
        obj = getattr(graphkeep_client, name)
        if inspect.isclass(obj):
            assert obj.__module__.startswith("graphkeep_client._"), name  # private modules


def _surface(obj: object) -> dict[str, list[str]]:
    methods = {}
    for name, member in inspect.getmembers(obj):
        if name.startswith("_") or not callable(member):
            continue
        methods[name] = list(inspect.signature(member).parameters)
    return methods


def test_sync_and_async_clients_have_the_same_surface() -> None:
    sync, asyn = Client("http://x"), AsyncClient("http://x")
    assert set(_surface(sync)) - {"close"} == set(_surface(asyn)) - {"aclose"}
    for group in ("assistants", "threads", "runs", "store"):
        assert _surface(getattr(sync, group)) == _surface(getattr(asyn, group)), group
        for name in _surface(getattr(asyn, group)):
            method = getattr(getattr(asyn, group), name)
            streams = name in ("stream", "join_stream")
            assert inspect.iscoroutinefunction(method) is not streams, name
            assert not inspect.iscoroutinefunction(getattr(getattr(sync, group), name))


def test_generated_sync_code_is_up_to_date() -> None:
    """_sync/ is generated from _async/ by scripts/unasync.py; edits go to _async/."""
    result = subprocess.run(
        [sys.executable, str(SDK / "scripts" / "unasync.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_only_httpx_is_required() -> None:
    project = tomllib.loads((SDK / "pyproject.toml").read_text())["project"]
    assert [re.split(r"[<>=!~ \[]", dep)[0] for dep in project["dependencies"]] == ["httpx"]
