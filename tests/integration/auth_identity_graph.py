"""A graph that reports the identity the server handed it (for the auth identity tests)."""

from __future__ import annotations

from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph
from langgraph.runtime import Runtime


class SeenState(TypedDict, total=False):
    seen: dict[str, Any]


def _report(state: SeenState, config: RunnableConfig, runtime: Runtime[Any]) -> SeenState:
    configurable = config.get("configurable", {})
    user = configurable.get("langgraph_auth_user")
    server_user = runtime.server_info.user if runtime.server_info is not None else None
    return {
        "seen": {
            "user_id": configurable.get("langgraph_auth_user_id"),
            "tenant_id": configurable.get("tenant_id"),
            "plain_user_id": configurable.get("user_id"),
            "auth_user": dict(user) if user is not None else None,
            "server_info_identity": getattr(server_user, "identity", None),
            "server_info_tenant": getattr(server_user, "tenant_id", None),
        }
    }


_builder = StateGraph(SeenState)
_builder.add_node("report", _report)
_builder.add_edge(START, "report")
graph = _builder.compile(name="identity")
