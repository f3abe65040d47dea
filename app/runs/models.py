"""The runs domain's objects: a `Run` as the service hands it on, a run being created, and the
local worker slots run creation may start it on (an interface: the service never holds the
pool itself)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from app.auth.principal import Principal
from app.db.ids import parse_uuid
from app.db.types import utcnow
from app.graphs.config import ServerConfig
from app.runs import prepare
from app.runs.queue import ClaimedRun
from app.runs.schemas import RunCreate, new_run_id
from app.statuses import RunStatus, ThreadStatus

JSONObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Run:
    """One run as stored (contract 5.1's Run, plus what an operator wants: attempts, timing,
    the error)."""

    run_id: str
    thread_id: str
    assistant_id: str
    graph_id: str
    created_at: datetime
    updated_at: datetime
    status: RunStatus
    metadata: JSONObject
    kwargs: JSONObject
    multitask_strategy: str
    cancel_reason: str | None
    attempt: int
    started_at: datetime | None
    ended_at: datetime | None
    error: JSONObject | None

    @classmethod
    def from_row(cls, row: Any) -> Run:
        m = row._mapping  # by key: a Row's attribute lookup costs about five times more
        return cls(
            run_id=m["run_id"],
            thread_id=m["thread_id"],
            assistant_id=m["assistant_id"],
            graph_id=m["graph_id"],
            created_at=m["created_at"],
            updated_at=m["updated_at"],
            status=RunStatus(m["status"]),
            metadata=m["metadata"],
            kwargs=m["kwargs"],
            multitask_strategy=m["multitask_strategy"],
            cancel_reason=m["cancel_reason"],
            attempt=m["attempt"],
            started_at=m["started_at"],
            ended_at=m["ended_at"],
            error=m["error"],
        )

    def to_json(self, *, timing: bool = False) -> JSONObject:
        """The contract's Run object; `timing` adds attempt, start, end and error."""
        out: JSONObject = {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "assistant_id": self.assistant_id,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "status": self.status.value,
            "metadata": self.metadata,
            "kwargs": self.kwargs,
            "multitask_strategy": self.multitask_strategy,
            "cancel_reason": self.cancel_reason,
        }
        if timing:
            out["attempt"] = self.attempt
            out["started_at"] = self.started_at.isoformat() if self.started_at else None
            out["ended_at"] = self.ended_at.isoformat() if self.ended_at else None
            out["error"] = self.error
        return out


def thread_output(row: Any) -> JSONObject:
    """A finished run's output from its thread's row (`queries.thread_outcome`): the error,
    or the values (with the pending interrupts under `__interrupt__`)."""
    if row.status == ThreadStatus.ERROR and row.error:
        return {"__error__": row.error}
    values = row.state if isinstance(row.state, dict) else ({} if row.state is None else row.state)
    if row.interrupts:
        merged = [i for items in row.interrupts.values() for i in items]
        if isinstance(values, dict):
            return {**values, "__interrupt__": merged}
    return values


class LocalWorkers(Protocol):
    """This process's worker slots as run creation sees them (app/runs/worker.py's pool): a
    run created while a slot is free is inserted already claimed by it and started at once,
    with no claim round trip."""

    @property
    def worker_id(self) -> str: ...

    @property
    def lease_seconds(self) -> float: ...

    def try_reserve(self) -> bool:
        """Promise a slot to a run being created; False when none is free."""
        ...

    def unreserve(self) -> None:
        """The promised slot was not used (the run was queued, or the create failed)."""
        ...

    def launch_reserved(self, run: ClaimedRun) -> None:
        """Start the run inserted already claimed on the promised slot."""
        ...


@dataclass(frozen=True)
class NewRun:
    """What a run create request settled before touching the database; the create's
    statements build their rows from it."""

    principal: Principal
    payload: RunCreate
    stateless: bool
    run_id: str
    thread_id: str
    assistant_id: str
    now: datetime
    available: datetime
    strategy: str
    headers: Mapping[str, str]

    @classmethod
    def build(
        cls,
        principal: Principal,
        thread_id: str | None,
        payload: RunCreate,
        headers: Mapping[str, str],
        assistant_id: str,
        config: ServerConfig,
    ) -> NewRun:
        """Validate the request (400 before anything is read) and fix the new ids and times;
        `config`: the server's langgraph.json (webhook URL policy, configurable headers)."""
        prepare.validate(payload, stateless=thread_id is None, webhook_url=config.webhooks.url)
        now = utcnow()
        return cls(
            principal=principal,
            payload=payload,
            stateless=thread_id is None,
            run_id=new_run_id(),
            thread_id=new_run_id()
            if thread_id is None
            else parse_uuid(thread_id, what="thread_id"),
            assistant_id=assistant_id,
            now=now,
            available=now + timedelta(seconds=payload.after_seconds or 0),
            strategy=payload.multitask_strategy or "enqueue",
            headers=prepare.forwarded_headers(headers, config.http.configurable_headers),
        )

    @property
    def tenant_id(self) -> str:
        return self.principal.tenant_id

    def graph_kwargs(self, assistant: Any) -> JSONObject:
        return prepare.build_kwargs(
            self.payload,
            principal=self.principal,
            run_id=self.run_id,
            thread_id=self.thread_id,
            assistant_id=self.assistant_id,
            graph_id=assistant.graph_id,
            assistant_config=assistant.config or {},
            assistant_context=assistant.context or {},
            headers=self.headers,
            temporary=self.stateless,
        )

    def thread_metadata(self, graph_id: str) -> JSONObject:
        """Metadata of a thread this run creates (stateless, or if_not_exists=create)."""
        given = {
            **(((self.payload.config or {}).get("metadata")) or {}),
            **(self.payload.metadata or {}),
        }
        return self.marked_metadata(given, graph_id)

    def marked_metadata(self, metadata: JSONObject, graph_id: str) -> JSONObject:
        """An existing thread's metadata once this run is queued on it: it names the graph
        and assistant of its latest run."""
        return {**metadata, "graph_id": graph_id, "assistant_id": self.assistant_id}

    def thread_row(self, metadata: JSONObject, config: JSONObject) -> JSONObject:
        """The threads row of a thread this run creates: busy with it from the start."""
        return {
            "thread_id": self.thread_id,
            "tenant_id": self.tenant_id,
            "status": ThreadStatus.BUSY.value,
            "metadata": metadata,
            "config": config,
            "values": None,
            "interrupts": {},
            "error": None,
            "created_at": self.now,
            "updated_at": self.now,
            "state_updated_at": self.now,
        }

    def run_row(
        self,
        assistant: Any,
        thread_metadata: JSONObject,
        kwargs: JSONObject,
        *,
        claimed_by: LocalWorkers | None,
    ) -> JSONObject:
        """The runs row; `claimed_by` a local pool: inserted already running on it."""
        row: JSONObject = {
            "run_id": self.run_id,
            "tenant_id": self.tenant_id,
            "thread_id": self.thread_id,
            "assistant_id": self.assistant_id,
            "graph_id": assistant.graph_id,
            "status": RunStatus.PENDING.value,
            "metadata": prepare.run_metadata(
                self.payload,
                assistant_metadata=assistant.metadata or {},
                thread_metadata=thread_metadata,
                assistant_id=self.assistant_id,
            ),
            "kwargs": kwargs,
            "multitask_strategy": self.strategy,
            "created_at": self.available,
            "updated_at": self.now,
            "available_at": self.available,
            "attempt": 0,
            "temporary": self.stateless,
            "worker_id": None,
            "lease_expires_at": None,
            "started_at": None,
        }
        if claimed_by is not None:
            row.update(
                status=RunStatus.RUNNING.value,
                worker_id=claimed_by.worker_id,
                lease_expires_at=self.now + timedelta(seconds=claimed_by.lease_seconds),
                attempt=1,
                started_at=self.now,
            )
        return row

    def first_attempt(self, created: Any, kwargs: JSONObject) -> ClaimedRun:
        """The claim of this run just inserted running (row `created`), for the local worker
        slot that takes it without a claim round trip."""
        return ClaimedRun(
            run_id=self.run_id,
            tenant_id=self.tenant_id,
            thread_id=self.thread_id,
            assistant_id=self.assistant_id,
            graph_id=created.graph_id,
            kwargs=kwargs,
            metadata=dict(created.metadata),
            attempt=1,
            temporary=self.stateless,
            cancel_action=None,
            created_at=created.created_at,
        )
