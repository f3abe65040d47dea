"""A graph that reports the string values of its `configurable` (forwarded headers)."""

from __future__ import annotations

from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph


class SeenState(TypedDict, total=False):
    seen: dict[str, Any]


def _report(state: SeenState, config: RunnableConfig) -> SeenState:
    configurable = config.get("configurable", {})
    return {"seen": {k: v for k, v in configurable.items() if isinstance(v, str)}}


_builder = StateGraph(SeenState)
_builder.add_node("report", _report)
_builder.add_edge(START, "report")
graph = _builder.compile(name="headers")
