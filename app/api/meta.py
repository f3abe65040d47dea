"""System endpoints: liveness and server info."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from app import __version__
from app.api.lean_route import resource_router

router = resource_router("system")


def _pkg_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:  # pragma: no cover - always installed
        return None


@router.get("/ok", operation_id="ok")
async def ok() -> dict[str, Any]:
    """Liveness: the process answers. Readiness (database, schema) is `/ready`."""
    return {"ok": True}


@router.get("/info", operation_id="info")
async def info() -> dict[str, Any]:
    return {
        "version": __version__,
        "langgraph_py_version": _pkg_version("langgraph"),
        "flags": {"assistants": True, "crons": True, "langsmith": False, "strict_resume": True},
        "host": {"kind": "graphkeep"},
    }
