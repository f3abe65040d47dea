"""Subscription filters of the thread-stream protocol (contract section 7)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.runs.threadlog.log import LogEvent

CHANNELS = (
    "values",
    "updates",
    "messages",
    "tools",
    "custom",
    "lifecycle",
    "input",
    "tasks",
    "checkpoints",
)
MAX_CHANNELS = 64
MAX_NAMESPACES = 64
MAX_SEGMENTS = 32
_WIRE = {"input": "input.requested"}


class FilterError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Subscription:
    methods: frozenset[str]  # wire methods subscribed whole
    custom_names: frozenset[str]  # `custom:<name>` tokens
    namespaces: tuple[tuple[str, ...], ...] | None  # None: every namespace
    depth: int | None
    since: int | None

    def matches(self, event: LogEvent) -> bool:
        if event.method not in self.methods:
            if event.method != "custom" or not self.custom_names:
                return False
            if event.data_name() not in self.custom_names:
                return False
        if self.namespaces is None:
            return True
        namespace = event.namespace  # parsed once per event, not per prefix
        return any(self._under(namespace, prefix) for prefix in self.namespaces)

    def _under(self, namespace: list[str], prefix: tuple[str, ...]) -> bool:
        if len(namespace) < len(prefix):
            return False
        for seg, want in zip(namespace, prefix, strict=False):
            if seg != want and (":" in want or seg.split(":", 1)[0] != want):
                return False
        return self.depth is None or len(namespace) - len(prefix) <= self.depth


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def parse_subscription(body: Mapping[str, Any]) -> Subscription:
    channels = body.get("channels")
    if not isinstance(channels, list) or not channels:
        raise FilterError("channels must be a non-empty list")
    if len(channels) > MAX_CHANNELS:
        raise FilterError(f"at most {MAX_CHANNELS} channels")
    methods: set[str] = set()
    names: set[str] = set()
    for token in channels:
        if isinstance(token, str) and token in CHANNELS:
            methods.add(_WIRE.get(token, token))
        elif isinstance(token, str) and token.startswith("custom:") and len(token) > 7:
            names.add(token[7:])
        else:
            raise FilterError(f"unknown channel: {str(token)[:64]!r}")
    namespaces: tuple[tuple[str, ...], ...] | None = None
    raw = body.get("namespaces")
    if (
        isinstance(raw, list)
        and raw
        and len(raw) <= MAX_NAMESPACES
        and all(
            isinstance(p, list) and len(p) <= MAX_SEGMENTS and all(isinstance(s, str) for s in p)
            for p in raw
        )
    ):
        namespaces = tuple(tuple(p) for p in raw)
    depth = _int(body.get("depth")) if namespaces is not None else None
    return Subscription(
        frozenset(methods), frozenset(names), namespaces, depth, _int(body.get("since"))
    )
