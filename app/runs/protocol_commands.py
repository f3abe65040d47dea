"""Thread-stream protocol commands over HTTP (contract sections 3, 4): `run.start`,
`input.respond`, `agent.getTree`. Runs they create are ordinary runs (listed, cancellable,
multitask rules) marked for the v3 driver (app/runs/protocol_runs.py).

Errors are `CommandError(code, message)`; the API turns them and the run service's
AppErrors into the protocol's error envelope (HTTP 200).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import Any

from app.auth.principal import Principal
from app.errors import AppError
from app.runs.protocol_runs import PROTOCOL_MARKER
from app.runs.schemas import RunCreate
from app.runs.service import RunService
from app.statuses import ThreadStatus
from app.threads.service import ThreadService

STRATEGIES = ("reject", "interrupt", "rollback", "enqueue")
# run kwargs the official server fixes for protocol runs (contract section 1)
_FIXED = {
    "stream_subgraphs": True,
    "stream_resumable": True,
    "on_completion": "keep",
    "if_not_exists": "create",
    "after_seconds": 0,
}
BUSY_WAIT_SECONDS = 5.0  # input.respond may race the end of the interrupted run


class CommandError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _object(params: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    value = params.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise CommandError("invalid_argument", f"{key} must be an object")
    return value


def _config(params: Mapping[str, Any], thread_id: str) -> dict[str, Any]:
    config = dict(_object(params, "config") or {})
    configurable = config.get("configurable") or {}
    if not isinstance(configurable, dict):
        raise CommandError("invalid_argument", "config.configurable must be an object")
    config["configurable"] = {**configurable, "thread_id": thread_id, PROTOCOL_MARKER: True}
    return config


def _tracer(params: Mapping[str, Any]) -> None:
    tracer = params.get("langsmith_tracer")
    if tracer is None:
        return
    if not isinstance(tracer, dict) or any(
        k not in ("project_name", "example_id") or not isinstance(v, str) for k, v in tracer.items()
    ):
        raise CommandError(
            "invalid_argument",
            "langsmith_tracer must be an object with string project_name / example_id",
        )


class ProtocolCommands:
    def __init__(self, *, runs: RunService, threads: ThreadService) -> None:
        self.runs = runs
        self.threads = threads

    async def _create(
        self, principal: Principal, thread_id: str, body: dict[str, Any], headers: Mapping[str, str]
    ) -> str:
        try:
            payload = RunCreate.model_validate({**body, **_FIXED})
        except ValueError as exc:
            raise CommandError("invalid_argument", str(exc).splitlines()[0]) from None
        created = await self.runs.create(
            principal=principal, thread_id=thread_id, payload=payload, headers=headers
        )
        return created.run_id

    async def run_start(
        self,
        principal: Principal,
        thread_id: str,
        params: Mapping[str, Any],
        headers: Mapping[str, str],
    ) -> dict[str, Any]:
        assistant_id = params.get("assistant_id")
        if not isinstance(assistant_id, str) or not assistant_id:
            raise CommandError("invalid_argument", "assistant_id is required")
        _tracer(params)
        config = _config(params, thread_id)
        checkpoint_id = config["configurable"].get("checkpoint_id")
        if checkpoint_id is not None:
            try:
                uuid.UUID(str(checkpoint_id))
            except ValueError:
                raise CommandError("invalid_argument", "checkpoint_id must be a UUID") from None
        strategy = params.get("multitaskStrategy")
        body: dict[str, Any] = {
            "assistant_id": assistant_id,
            "config": config,
            "metadata": _object(params, "metadata"),
            "multitask_strategy": strategy if strategy in STRATEGIES else "enqueue",
            "checkpoint_id": checkpoint_id,
        }
        value = params.get("input")
        if value is not None:
            thread = await self.threads.find_thread(
                tenant_id=principal.tenant_id, thread_id=thread_id
            )
            # start vs resume is decided on the settled thread: a run still finishing at its
            # interrupt has not stored the interrupt yet (the official server polls too)
            deadline = asyncio.get_running_loop().time() + BUSY_WAIT_SECONDS
            while (
                thread is not None
                and thread.status == ThreadStatus.BUSY.value
                and not thread.interrupts
            ):
                if asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.05)
                thread = await self.threads.find_thread(
                    tenant_id=principal.tenant_id, thread_id=thread_id
                )
            if thread is not None and thread.interrupts:
                body["command"] = {"resume": value}  # RemoteGraph's Command(resume=x)
            else:
                body["input"] = value
        return {"run_id": await self._create(principal, thread_id, body, headers)}

    async def input_respond(
        self,
        principal: Principal,
        thread_id: str,
        params: Mapping[str, Any],
        headers: Mapping[str, str],
    ) -> dict[str, Any]:
        answers = self._answers(params)
        thread = await self.threads.find_thread(tenant_id=principal.tenant_id, thread_id=thread_id)
        deadline = asyncio.get_running_loop().time() + BUSY_WAIT_SECONDS
        # `input.requested` reaches clients before the interrupted run has stored its end:
        # wait for the interrupt to show on the thread, a bounded while
        while thread is not None and not self._pending(thread, answers):
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.05)
            thread = await self.threads.find_thread(
                tenant_id=principal.tenant_id, thread_id=thread_id
            )
        assistant_id = (thread.metadata or {}).get("assistant_id") if thread else None
        if thread is None or not assistant_id:
            raise CommandError("no_such_run", "no run on this thread")
        if not self._pending(thread, answers):
            raise CommandError("no_such_interrupt", "interrupt is not pending on the thread")
        command: dict[str, Any] = {"resume": answers}
        for key in ("update", "goto"):
            if params.get(key) is not None:
                command[key] = params[key]
        body = {
            "assistant_id": str(assistant_id),
            "command": command,
            "config": _config(params, thread_id),
            "metadata": _object(params, "metadata"),
            "multitask_strategy": "enqueue",
        }
        await self._create(principal, thread_id, body, headers)
        return {}

    @staticmethod
    def _answers(params: Mapping[str, Any]) -> dict[str, Any]:
        many = params.get("responses")
        items = many if many is not None else [params]
        if not isinstance(items, list) or not items:
            raise CommandError("invalid_argument", "responses must be a non-empty list")
        answers: dict[str, Any] = {}
        for item in items:
            if not isinstance(item, dict):
                raise CommandError("invalid_argument", "each response must be an object")
            interrupt_id = item.get("interrupt_id")
            if not isinstance(interrupt_id, str) or not interrupt_id:
                raise CommandError("invalid_argument", "interrupt_id is required")
            namespace = item.get("namespace", [])
            if not isinstance(namespace, list) or not all(isinstance(s, str) for s in namespace):
                raise CommandError("invalid_argument", "namespace must be a list of strings")
            answers[interrupt_id] = item.get("response")
        return answers

    @staticmethod
    def _pending(thread: Any, answers: Mapping[str, Any]) -> bool:
        pending = {
            item.get("id")
            for items in (thread.interrupts or {}).values()
            for item in (items or [])
            if isinstance(item, dict)
        }
        return all(interrupt_id in pending for interrupt_id in answers)


def app_error_message(status: int, exc: AppError) -> str:
    """The HTTP error flattened into an `unknown_error` message, as the official server does."""
    return f"{status}: {exc.detail}"
