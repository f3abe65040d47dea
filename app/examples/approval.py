"""Approval flow: proposes an action, interrupts for a human decision, then acts on it."""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict


class ApprovalState(TypedDict, total=False):
    request: str
    proposal: str
    approved: bool
    result: str


def propose(state: ApprovalState) -> dict[str, Any]:
    return {"proposal": f"execute: {state.get('request', 'nothing')}"}


def review(state: ApprovalState) -> dict[str, Any]:
    """Pause until a human resumes with True/False or {"approved": bool}."""
    answer = interrupt({"question": "Approve this action?", "proposal": state.get("proposal")})
    approved = answer.get("approved") if isinstance(answer, dict) else answer
    return {"approved": bool(approved)}


def execute(state: ApprovalState) -> dict[str, Any]:
    if state.get("approved"):
        return {"result": f"done: {state.get('proposal')}"}
    return {"result": "rejected"}


builder = StateGraph(ApprovalState)
builder.add_node("propose", propose)
builder.add_node("review", review)
builder.add_node("execute", execute)
builder.add_edge(START, "propose")
builder.add_edge("propose", "review")
builder.add_edge("review", "execute")
builder.add_edge("execute", END)
graph = builder.compile()
