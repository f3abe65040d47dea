"""LangGraph's v3 protocol events -> thread-log events (contract section 6).

LangGraph builds the events (`astream_events(version="v3")` with its transformers); this
only adapts them to the wire: root lifecycle is synthesised by the driver, interrupts
carried on `values` become `input.requested` (plus the root `interrupted` after the first),
`__interrupt__` keys are stripped, `messages` data is the content-block event without
LangGraph's metadata tuple, and payloads are made JSON-able once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.graphs.jsonable import to_jsonable

Event = tuple[str, list[str], Any]  # (method, namespace, data)

PASSED_THROUGH = frozenset({"updates", "tools", "custom", "lifecycle"})
_INTERRUPT_KEY = "__interrupt__"


def _strip_interrupt(data: Any) -> Any:
    if isinstance(data, Mapping) and _INTERRUPT_KEY in data:
        return {k: v for k, v in data.items() if k != _INTERRUPT_KEY}
    return data


class ProtocolNormaliser:
    """One run's adapter; remembers the interrupts it announced."""

    def __init__(self, graph_name: str) -> None:
        self.graph_name = graph_name
        self.announced: set[str] = set()
        self.root_interrupted = False

    def convert(self, event: Mapping[str, Any]) -> list[Event]:
        method = event.get("method")
        params = event.get("params") or {}
        namespace = [str(s) for s in params.get("namespace") or []]
        data = params.get("data")
        if method == "values":
            out = self._interrupts(namespace, params.get("interrupts") or ())
            out.append(("values", namespace, to_jsonable(_strip_interrupt(data))))
            return out
        if method == "messages":
            body = self._message(data)
            if not isinstance(body, dict) or "event" not in body:
                return []  # a whole message (not a content-block event): the official drops it
            return [("messages", namespace, body)]
        if method == "lifecycle":
            child = data.get("namespace") if isinstance(data, Mapping) else None
            if isinstance(child, list) and child:
                # a subgraph's lifecycle, announced from its parent: at the child's namespace
                return [("lifecycle", [str(s) for s in child], to_jsonable(data))]
            if not namespace:
                return []  # the root's lifecycle is the driver's (running ... one terminal)
        if method in PASSED_THROUGH:
            if method == "updates":
                data = _strip_interrupt(data)
            return [(str(method), namespace, to_jsonable(data))]
        return []  # tasks, checkpoints, debug: not on the wire (contract section 1)

    def _interrupts(self, namespace: list[str], interrupts: Any) -> list[Event]:
        out: list[Event] = []
        for item in interrupts:
            interrupt_id = getattr(item, "id", None)
            if not isinstance(interrupt_id, str) or interrupt_id in self.announced:
                continue
            self.announced.add(interrupt_id)
            payload = to_jsonable(getattr(item, "value", None))
            # SDK 0.4.14 reads `value`, the protocol says `payload`: send both
            data = {"interrupt_id": interrupt_id, "payload": payload, "value": payload}
            out.append(("input.requested", namespace, data))
            if not self.root_interrupted:
                self.root_interrupted = True
                out.append(("lifecycle", [], self.lifecycle("interrupted")))
        return out

    @staticmethod
    def _message(data: Any) -> Any:
        if isinstance(data, (tuple, list)) and len(data) == 2:
            body, meta = data
            body = dict(to_jsonable(body))
            if body.get("event") == "message-start" and isinstance(meta, Mapping):
                node = meta.get("langgraph_node")
                if isinstance(node, str):
                    body.setdefault("metadata", {"langgraph_node": node})
            return body
        return to_jsonable(data)

    def lifecycle(self, event: str, error: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"event": event, "graph_name": self.graph_name}
        if error is not None:
            body["error"] = error
        return body
