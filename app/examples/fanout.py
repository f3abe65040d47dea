"""Fan-out: one `work` task per item (Send), each retried by a RetryPolicy.

Items named "flaky..." fail on their first attempt and succeed on the retry, which shows the
retry without making the outcome random.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy, Send
from typing_extensions import TypedDict


class FanoutState(TypedDict, total=False):
    items: list[str]
    results: Annotated[list[str], operator.add]


class WorkItem(TypedDict):
    item: str


class TransientError(RuntimeError):
    """Raised once per flaky item; the RetryPolicy retries it."""


# Attempts per task (the task id lives in checkpoint_ns and is the same across retries).
# Bounded so a long-lived server does not grow it without limit.
_ATTEMPTS: OrderedDict[str, int] = OrderedDict()
_MAX_TRACKED = 10_000


def _attempt(task_key: str) -> int:
    count = _ATTEMPTS.pop(task_key, 0) + 1
    _ATTEMPTS[task_key] = count
    while len(_ATTEMPTS) > _MAX_TRACKED:
        _ATTEMPTS.popitem(last=False)
    return count


def dispatch(state: FanoutState) -> list[Send]:
    return [Send("work", WorkItem(item=item)) for item in state.get("items") or []]


def work(task: WorkItem, config: RunnableConfig) -> dict[str, Any]:
    item = task["item"]
    task_key = str(config.get("configurable", {}).get("checkpoint_ns", "")) + "|" + item
    if item.startswith("flaky") and _attempt(task_key) == 1:
        raise TransientError(f"{item}: transient failure")
    return {"results": [item.upper()]}


def summarize(state: FanoutState) -> dict[str, Any]:
    return {"results": [f"total={len(state.get('results') or [])}"]}


builder = StateGraph(FanoutState)
builder.add_node(
    "work",
    work,  # type: ignore[arg-type]  # a Send target takes its own payload type, not the state
    retry_policy=RetryPolicy(
        max_attempts=3, initial_interval=0.01, jitter=False, retry_on=TransientError
    ),
)
builder.add_node("summarize", summarize)
builder.add_conditional_edges(START, dispatch, ["work"])
builder.add_edge("work", "summarize")
builder.add_edge("summarize", END)
graph = builder.compile()
