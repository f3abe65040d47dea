"""A graph whose output storage cannot hold: a NUL, a lone surrogate or too deep a nesting,
as asked by its input (the input itself stays storable)."""

from __future__ import annotations

from typing import Any

from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict


class PoisonState(TypedDict, total=False):
    kind: str
    out: Any


def _nest(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


POISON: dict[str, Any] = {
    "nul": "a" + chr(0) + "b",
    "surrogate": "a" + chr(0xD800) + "b",
    "surrogate_key": {chr(0xDC00): 1},
    "deep": _nest(300),
    "fine": "ok",
}


def _emit(state: PoisonState) -> dict[str, Any]:
    kind = state.get("kind", "fine")
    if kind.startswith("raise:"):  # an exception whose message carries the caller's data
        raise ValueError(f"graph failed on {kind[6:]}")
    if kind.startswith("echo:"):
        return {"out": kind[5:]}
    return {"out": POISON[kind]}


_builder = StateGraph(PoisonState)
_builder.add_node("emit", _emit)
_builder.add_edge(START, "emit")
poison = _builder.compile(name="poison")
