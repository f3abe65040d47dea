"""Pure preparation of a run: validate the payload, build config, context, metadata, kwargs.

Effective config: assistant config, then the run's config, the run's `configurable` last,
then the server-owned keys (ids, forwarded headers, checkpoint, the caller's identity) so a
client can never choose its own user or tenant. A client's `user_id` reaches the graph
unchanged with auth off, as on the official server; with auth on it is the caller's
(app/auth/identity.py, docs/auth.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from app.auth.identity import identity_configurable, strip_identity
from app.auth.principal import Principal
from app.errors import InvalidInput, ValidationFailed
from app.graphs.http_options import HeaderPatterns, WebhookUrlPolicy, configurable_default
from app.runs.chunks import STREAM_MODES, V2_ONLY_MODES
from app.runs.schemas import RunCreate


def forwarded_headers(headers: Mapping[str, str], patterns: HeaderPatterns) -> dict[str, str]:
    """The request headers copied into configurable: langgraph.json's
    `http.configurable_headers` (default the official server's `x-*` and `user-agent`);
    credentials never, whatever the patterns say."""
    out: dict[str, str] = {}
    for name, value in headers.items():
        key = name.lower()
        if patterns.selects(key, default_include=configurable_default(key)):
            out[key] = value
    return out


def stream_modes(payload: RunCreate) -> list[str]:
    """The requested modes as a list; 422 for v2-only or unknown modes."""
    raw = payload.stream_mode
    modes = [raw] if isinstance(raw, str) else list(raw or [])
    for mode in modes:
        if mode in V2_ONLY_MODES:
            raise ValidationFailed(
                f"stream_mode {mode!r} is only available on the v2 streaming protocol"
            )
        if mode not in STREAM_MODES:
            raise ValidationFailed(
                f"stream_mode {mode!r} is not one of {', '.join(sorted(STREAM_MODES))}"
            )
    return list(dict.fromkeys(modes)) or ["values"]


def _checkpoint_keys(payload: RunCreate) -> dict[str, Any]:
    keys: dict[str, Any] = {}
    if payload.checkpoint is not None:
        keys = payload.checkpoint.model_dump(exclude_none=True)
    elif payload.checkpoint_id is not None:
        keys = {"checkpoint_id": payload.checkpoint_id}
    checkpoint_id = keys.get("checkpoint_id")
    if checkpoint_id is not None:
        try:
            uuid.UUID(str(checkpoint_id))
        except ValueError:
            raise ValidationFailed(f"checkpoint_id {checkpoint_id!r} is not a UUID") from None
    return keys


def validate(payload: RunCreate, *, stateless: bool, webhook_url: WebhookUrlPolicy | None) -> None:
    """Checks that need no database: 400 / 422."""
    configurable = (payload.config or {}).get("configurable") or {}
    if payload.context and configurable:
        raise InvalidInput(
            "Cannot specify both configurable and context. Prefer setting context alone. "
            "Context was introduced in LangGraph 0.6.0 and is the long term planned replacement "
            "for configurable."
        )
    if stateless and payload.command and payload.command.get("resume") is not None:
        raise InvalidInput("Cannot resume a stateless run (command.resume needs a thread).")
    if payload.config is not None and not isinstance(configurable, dict):
        raise ValidationFailed("config.configurable must be an object")
    stream_modes(payload)
    _checkpoint_keys(payload)
    if payload.webhook is not None and webhook_url is not None:  # langgraph.json webhooks.url
        problem = webhook_url.problem(payload.webhook)
        if problem is not None:
            raise ValidationFailed(problem)


def _durability(payload: RunCreate) -> str:
    if payload.durability is not None:
        return payload.durability
    if payload.checkpoint_during is False:
        return "exit"
    return "async"


def build_kwargs(
    payload: RunCreate,
    *,
    principal: Principal,
    run_id: str,
    thread_id: str,
    assistant_id: str,
    graph_id: str,
    assistant_config: Mapping[str, Any],
    assistant_context: Mapping[str, Any],
    headers: Mapping[str, str],
    temporary: bool,
) -> dict[str, Any]:
    """The run's stored kwargs (contract 5.1) including the effective config."""
    run_config = dict(payload.config or {})
    configurable: dict[str, Any] = {
        **dict(assistant_config.get("configurable") or {}),
        **strip_identity(run_config.get("configurable") or {}),
        **headers,  # the request's, selected by forwarded_headers
        **_checkpoint_keys(payload),
        "run_id": run_id,
        "thread_id": thread_id,
        "graph_id": graph_id,
        "assistant_id": assistant_id,
        **identity_configurable(principal),
    }
    config: dict[str, Any] = {**dict(assistant_config), **run_config, "configurable": configurable}
    tags = [*(assistant_config.get("tags") or []), *(run_config.get("tags") or [])]
    if tags:
        config["tags"] = list(dict.fromkeys(tags))
    context = {**dict(assistant_context), **(payload.context or {})}
    extra: dict[str, Any] = {"strict_resume": True} if payload.strict_resume else {}
    return {
        "input": payload.input,
        "command": payload.command,
        "config": config,
        "context": context,
        "stream_mode": stream_modes(payload),
        "interrupt_before": payload.interrupt_before,
        "interrupt_after": payload.interrupt_after,
        "webhook": payload.webhook,
        "feedback_keys": payload.feedback_keys,
        "temporary": temporary,
        "subgraphs": bool(payload.stream_subgraphs),
        "resumable": bool(payload.stream_resumable),
        "durability": _durability(payload),
        "checkpoint_during": payload.checkpoint_during,
        "on_completion": payload.on_completion or "delete",
        **extra,
    }


def run_metadata(
    payload: RunCreate,
    *,
    assistant_metadata: Mapping[str, Any],
    thread_metadata: Mapping[str, Any],
    assistant_id: str,
) -> dict[str, Any]:
    """Assistant, thread, config.metadata and run metadata merged; assistant_id forced."""
    config_metadata = (payload.config or {}).get("metadata") or {}
    return {
        **dict(assistant_metadata),
        **dict(thread_metadata),
        **(config_metadata if isinstance(config_metadata, dict) else {}),
        **(payload.metadata or {}),
        "assistant_id": assistant_id,
    }
