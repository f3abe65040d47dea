"""Memory agent: remembers what each user says in the Store and recalls it on later threads.

The namespace comes from `configurable["user_id"]`, as in LangGraph's memory examples. With
auth on the server sets it to the authenticated user (a client's own value is replaced), so
users cannot read each other's memories; with auth off it is whatever the client sent, as on
the official server, else the anonymous caller.
"""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.base import BaseStore

from app.examples.fake_model import echo_model, last_human_text

FALLBACK_USER = "anonymous"


def memory_namespace(config: RunnableConfig) -> tuple[str, ...]:
    configurable = config.get("configurable") or {}
    user_id = configurable.get("user_id") or configurable.get("langgraph_auth_user_id")
    return ("memories", str(user_id or FALLBACK_USER))


async def remember(
    state: MessagesState, config: RunnableConfig, *, store: BaseStore
) -> dict[str, Any]:
    namespace = memory_namespace(config)
    text = last_human_text(state["messages"])
    if text:
        await store.aput(namespace, uuid.uuid5(uuid.NAMESPACE_OID, text).hex, {"text": text})
    known = await store.asearch(namespace, limit=100)
    facts = sorted(item.value.get("text", "") for item in known)
    reply = f"I remember {len(facts)} thing(s): " + "; ".join(facts)
    message = await echo_model(reply).ainvoke(state["messages"], config)
    return {"messages": [AIMessage(content=message.text, id=message.id)]}


builder = StateGraph(MessagesState)
builder.add_node("remember", remember)
builder.add_edge(START, "remember")
graph = builder.compile()
