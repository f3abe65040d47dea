"""System endpoints: liveness and server info."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from app import __version__
from app.api.deps import AppStateDep
from app.api.routing import resource_router
from app.graphs.config import DISABLE_A2A, DISABLE_MCP

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


def _auth_info(state: Any) -> dict[str, Any]:
    custom = state.graphs.config.auth_path
    if custom is not None:
        return {"kind": "custom", "path": custom}
    return {"kind": state.settings.auth}


@router.get("/info", operation_id="info")
async def info(state: AppStateDep) -> dict[str, Any]:
    settings, config = state.settings, state.graphs.config
    return {
        "version": __version__,
        "langgraph_py_version": _pkg_version("langgraph"),
        "flags": {
            # langgraph.json's `http.disable_*` remove these route groups (app/api/custom_app.py)
            "assistants": not config.http_flag("disable_assistants"),
            "crons": not config.http_flag("disable_runs"),
            "langsmith": False,
            "strict_resume": True,
            # /mcp and /a2a/{assistant_id} (app/protocols/): the setting and langgraph.json's
            # `http.disable_*` both switch them off
            "mcp": settings.mcp_enabled and not config.http_flag(DISABLE_MCP),
            "a2a": settings.a2a_enabled and not config.http_flag(DISABLE_A2A),
        },
        "host": {"kind": "graphkeep"},
        # custom auth (langgraph.json `auth.path`), its handler's source; else the built-in mode
        "auth": _auth_info(state),
    }
