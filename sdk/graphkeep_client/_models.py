"""Typed result models: frozen dataclasses built from the server's JSON.

Parsing is lenient on purpose: unknown keys are ignored (newer servers add fields) and keys
left out by `select=` fall back to their defaults. Timestamps become aware `datetime`s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

JSONObject = dict[str, Any]

ThreadStatus = Literal["idle", "busy", "interrupted", "error"]
RunStatus = Literal["pending", "running", "success", "error", "timeout", "interrupted"]
MultitaskStrategy = Literal["reject", "interrupt", "rollback", "enqueue"]
Durability = Literal["sync", "async", "exit"]
IfExists = Literal["raise", "do_nothing"]
IfNotExists = Literal["create", "reject"]
CancelAction = Literal["interrupt", "rollback"]
SortOrder = Literal["asc", "desc"]


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    return datetime.fromisoformat(value)


def _dict(value: Any) -> JSONObject:
    return dict(value) if isinstance(value, Mapping) else {}


@dataclass(frozen=True, kw_only=True, slots=True)
class Interrupt:
    """A pending `interrupt()` of a graph: its id and the value the node passed."""

    id: str
    value: Any = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Interrupt:
        """Build from the server's JSON object."""
        return cls(id=str(data.get("id", "")), value=data.get("value"))


def _interrupts(value: Any) -> list[Interrupt]:
    return [Interrupt.from_json(i) for i in value or () if isinstance(i, Mapping)]


@dataclass(frozen=True, kw_only=True, slots=True)
class Checkpoint:
    """Points at one checkpoint of a thread; pass it back as `checkpoint=` to fork or replay."""

    thread_id: str | None = None
    checkpoint_ns: str = ""
    checkpoint_id: str | None = None
    checkpoint_map: JSONObject | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Checkpoint:
        """Build from the server's JSON object."""
        cmap = data.get("checkpoint_map")
        return cls(
            thread_id=data.get("thread_id"),
            checkpoint_ns=data.get("checkpoint_ns") or "",
            checkpoint_id=data.get("checkpoint_id"),
            checkpoint_map=dict(cmap) if isinstance(cmap, Mapping) else None,
        )

    def to_json(self) -> JSONObject:
        """The wire form, leaving out unset keys."""
        out: JSONObject = {"checkpoint_ns": self.checkpoint_ns}
        if self.thread_id is not None:
            out["thread_id"] = self.thread_id
        if self.checkpoint_id is not None:
            out["checkpoint_id"] = self.checkpoint_id
        if self.checkpoint_map is not None:
            out["checkpoint_map"] = self.checkpoint_map
        return out


def _checkpoint(value: Any) -> Checkpoint | None:
    return Checkpoint.from_json(value) if isinstance(value, Mapping) else None


@dataclass(frozen=True, kw_only=True, slots=True)
class Assistant:
    """A configured graph: which graph, with which config, context and metadata."""

    assistant_id: str
    graph_id: str = ""
    name: str = ""
    description: str | None = None
    config: JSONObject = field(default_factory=dict)
    context: JSONObject = field(default_factory=dict)
    metadata: JSONObject = field(default_factory=dict)
    version: int = 1
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Assistant:
        """Build from the server's JSON object."""
        return cls(
            assistant_id=str(data.get("assistant_id", "")),
            graph_id=data.get("graph_id") or "",
            name=data.get("name") or "",
            description=data.get("description"),
            config=_dict(data.get("config")),
            context=_dict(data.get("context")),
            metadata=_dict(data.get("metadata")),
            version=int(data.get("version") or 1),
            created_at=_time(data.get("created_at")),
            updated_at=_time(data.get("updated_at")),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Cron:
    """A scheduled run: `schedule` (5-field cron) in `timezone`, on `thread_id` or stateless."""

    cron_id: str
    assistant_id: str = ""
    thread_id: str | None = None
    schedule: str = ""
    timezone: str | None = None
    end_time: datetime | None = None
    enabled: bool = True
    on_run_completed: str | None = None
    payload: JSONObject = field(default_factory=dict)
    metadata: JSONObject = field(default_factory=dict)
    user_id: str | None = None
    next_run_date: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Cron:
        """Build from the server's JSON object."""
        return cls(
            cron_id=str(data.get("cron_id", "")),
            assistant_id=data.get("assistant_id") or "",
            thread_id=data.get("thread_id"),
            schedule=data.get("schedule") or "",
            timezone=data.get("timezone"),
            end_time=_time(data.get("end_time")),
            enabled=bool(data.get("enabled", True)),
            on_run_completed=data.get("on_run_completed"),
            payload=_dict(data.get("payload")),
            metadata=_dict(data.get("metadata")),
            user_id=data.get("user_id"),
            next_run_date=_time(data.get("next_run_date")),
            created_at=_time(data.get("created_at")),
            updated_at=_time(data.get("updated_at")),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Thread:
    """A conversation: status, metadata and a cache of its latest values and interrupts."""

    thread_id: str
    status: ThreadStatus | str = "idle"
    metadata: JSONObject = field(default_factory=dict)
    config: JSONObject = field(default_factory=dict)
    values: Any = None
    interrupts: dict[str, list[Interrupt]] = field(default_factory=dict)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    state_updated_at: datetime | None = None
    ttl: JSONObject | None = None
    error: Any = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Thread:
        """Build from the server's JSON object."""
        raw = data.get("interrupts")
        interrupts = (
            {str(k): _interrupts(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}
        )
        ttl = data.get("ttl")
        return cls(
            thread_id=str(data.get("thread_id", "")),
            status=data.get("status") or "idle",
            metadata=_dict(data.get("metadata")),
            config=_dict(data.get("config")),
            values=data.get("values"),
            interrupts=interrupts,
            created_at=_time(data.get("created_at")),
            updated_at=_time(data.get("updated_at")),
            state_updated_at=_time(data.get("state_updated_at")),
            ttl=dict(ttl) if isinstance(ttl, Mapping) else None,
            error=data.get("error"),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ThreadTask:
    """A task of the next super-step (a node to run), with its interrupts or error."""

    id: str
    name: str
    error: str | None = None
    interrupts: list[Interrupt] = field(default_factory=list)
    checkpoint: Checkpoint | None = None
    state: ThreadState | None = None
    result: Any = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ThreadTask:
        """Build from the server's JSON object."""
        state = data.get("state")
        return cls(
            id=str(data.get("id", "")),
            name=str(data.get("name", "")),
            error=data.get("error"),
            interrupts=_interrupts(data.get("interrupts")),
            checkpoint=_checkpoint(data.get("checkpoint")),
            state=ThreadState.from_json(state) if isinstance(state, Mapping) else None,
            result=data.get("result"),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ThreadState:
    """A thread's state at one checkpoint: values, what runs next, and where it sits."""

    values: Any = field(default_factory=dict)
    next: list[str] = field(default_factory=list)
    tasks: list[ThreadTask] = field(default_factory=list)
    interrupts: list[Interrupt] = field(default_factory=list)
    checkpoint: Checkpoint | None = None
    parent_checkpoint: Checkpoint | None = None
    metadata: JSONObject | None = None
    created_at: datetime | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ThreadState:
        """Build from the server's JSON object."""
        meta = data.get("metadata")
        return cls(
            values=data.get("values", {}),
            next=[str(n) for n in data.get("next") or ()],
            tasks=[ThreadTask.from_json(t) for t in data.get("tasks") or ()],
            interrupts=_interrupts(data.get("interrupts")),
            checkpoint=_checkpoint(data.get("checkpoint")),
            parent_checkpoint=_checkpoint(data.get("parent_checkpoint")),
            metadata=dict(meta) if isinstance(meta, Mapping) else None,
            created_at=_time(data.get("created_at")),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Run:
    """One execution of an assistant on a thread."""

    run_id: str
    thread_id: str | None = None
    assistant_id: str | None = None
    status: RunStatus | str = "pending"
    metadata: JSONObject = field(default_factory=dict)
    multitask_strategy: str | None = None
    kwargs: JSONObject = field(default_factory=dict)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    cancel_reason: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Run:
        """Build from the server's JSON object."""
        return cls(
            run_id=str(data.get("run_id", "")),
            thread_id=data.get("thread_id"),
            assistant_id=data.get("assistant_id"),
            status=data.get("status") or "pending",
            metadata=_dict(data.get("metadata")),
            multitask_strategy=data.get("multitask_strategy"),
            kwargs=_dict(data.get("kwargs")),
            created_at=_time(data.get("created_at")),
            updated_at=_time(data.get("updated_at")),
            cancel_reason=data.get("cancel_reason"),
        )

    @property
    def done(self) -> bool:
        """True once the run has reached a final status."""
        return self.status not in ("pending", "running")


@dataclass(frozen=True, kw_only=True, slots=True)
class Item:
    """A Store item: a JSON value under (namespace, key)."""

    namespace: tuple[str, ...]
    key: str
    value: JSONObject = field(default_factory=dict)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    score: float | None = None  # only set by a semantic search

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Item:
        """Build from the server's JSON object."""
        score = data.get("score")
        return cls(
            namespace=tuple(str(label) for label in data.get("namespace") or ()),
            key=str(data.get("key", "")),
            value=_dict(data.get("value")),
            created_at=_time(data.get("created_at")),
            updated_at=_time(data.get("updated_at")),
            score=float(score) if isinstance(score, int | float) else None,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Health:
    """`GET /ok`: whether the server answers, and the state of its services."""

    ok: bool
    services: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Health:
        """Build from the server's JSON object."""
        services = data.get("services")
        return cls(
            ok=bool(data.get("ok")),
            services={str(k): str(v) for k, v in services.items()}
            if isinstance(services, Mapping)
            else {},
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerInfo:
    """`GET /info`: server version and feature flags."""

    version: str
    langgraph_py_version: str | None = None
    flags: JSONObject = field(default_factory=dict)
    host: JSONObject = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ServerInfo:
        """Build from the server's JSON object."""
        return cls(
            version=str(data.get("version", "")),
            langgraph_py_version=data.get("langgraph_py_version"),
            flags=_dict(data.get("flags")),
            host=_dict(data.get("host")),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Command:
    """Resume, update or redirect a graph: sent as `command=` when creating a run.

    `resume` answers the pending `interrupt()` (or maps interrupt ids to answers), `update`
    writes state, `goto` names the node(s) to run next.
    """

    resume: Any = None
    update: Any = None
    goto: str | Sequence[str] | Mapping[str, Any] | None = None

    def to_json(self) -> JSONObject:
        """The wire form, leaving out unset members."""
        out: JSONObject = {}
        if self.resume is not None:
            out["resume"] = self.resume
        if self.update is not None:
            out["update"] = self.update
        if self.goto is not None:
            out["goto"] = self.goto if isinstance(self.goto, str | Mapping) else list(self.goto)
        return out
