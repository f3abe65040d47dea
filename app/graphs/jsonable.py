"""JSON encoding of graph output (state values, interrupts, stream chunks).

One encoder for everything a graph may emit: LangChain messages and other pydantic models,
dataclasses (Interrupt, Send), sets, datetimes, UUIDs, bytes. It lives in the graphs layer so
the thread service (state, history, values cache) and the runs engine share it.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import uuid
from collections.abc import Mapping
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Annotated, Any

import orjson
from langgraph.types import Command, Interrupt, Send
from pydantic import PlainSerializer

from app.db.storable import UnstorableValue, value_problem

# Dataclasses pass through to `_default`: orjson would otherwise dump every field of an
# Interrupt (including response_schema=None), which RemoteGraph cannot rebuild.
_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_PASSTHROUGH_DATACLASS


def _default(obj: Any) -> Any:
    if isinstance(obj, Interrupt):
        return interrupt_json(obj)
    if isinstance(obj, Send):
        return {"node": obj.node, "arg": obj.arg}
    if isinstance(obj, Command):
        return {
            k: v
            for k, v in (
                ("graph", obj.graph),
                ("update", obj.update),
                ("resume", obj.resume),
                ("goto", obj.goto),
            )
            if v not in (None, ())
        }
    model_dump = getattr(obj, "model_dump", None)
    if callable(model_dump):  # pydantic v2 models, LangChain messages
        return model_dump()
    as_dict = getattr(obj, "dict", None)
    if callable(as_dict) and hasattr(obj, "__fields__"):  # pydantic v1 models
        return as_dict()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    if isinstance(obj, datetime | date | time):
        return obj.isoformat()
    if isinstance(obj, timedelta):
        return obj.total_seconds()
    if isinstance(obj, uuid.UUID):
        return str(obj)
    if isinstance(obj, Decimal):
        return float(obj)
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, bytes | bytearray):
        return base64.b64encode(bytes(obj)).decode()
    if isinstance(obj, Mapping):
        return dict(obj)
    if isinstance(obj, BaseException):
        return {"error": type(obj).__name__, "message": str(obj)}
    # Anything else (callables, handles): its repr, never a failure that kills the stream.
    return repr(obj)


def interrupt_json(interrupt: Interrupt) -> dict[str, Any]:
    """`{"id", "value"}` plus `response_schema` when set: RemoteGraph rebuilds Interrupt(**it)."""
    # Field order of langgraph's Interrupt dataclass, as the official server writes it.
    result: dict[str, Any] = {"value": interrupt.value, "id": interrupt.id}
    schema = getattr(interrupt, "response_schema", None)
    if schema is not None:
        result["response_schema"] = schema
    return result


def dumps(obj: Any) -> str:
    """Compact JSON text of `obj`."""
    return orjson.dumps(obj, default=_default, option=_OPTIONS).decode()


def dump_bytes(obj: Any) -> bytes:
    """Compact UTF-8 JSON of `obj` (HTTP bodies: encoded once, no intermediate copy)."""
    return orjson.dumps(obj, default=_default, option=_OPTIONS)


def to_jsonable(obj: Any) -> Any:
    """`obj` as plain JSON types (dicts, lists, str, numbers), for JSON columns."""
    return orjson.loads(orjson.dumps(obj, default=_default, option=_OPTIONS))


def to_storable(obj: Any, what: str = "graph output") -> Any:
    """`to_jsonable(obj)` when both databases can store and read it back; UnstorableValue
    naming where it is not (a NUL, a lone surrogate, a non-finite or 64-bit-overflowing
    number, nesting too deep) otherwise. Called on graph output before it is persisted."""
    try:
        value = to_jsonable(obj)
    except orjson.JSONEncodeError as exc:  # a surrogate, or nesting beyond orjson's limit
        raise UnstorableValue(f"{what} cannot be stored: {exc}") from None
    problem = value_problem(value, what)
    if problem is not None:
        raise UnstorableValue(f"{what} cannot be stored: {problem}")
    return value


def error_payload(exc: BaseException) -> dict[str, str]:
    """The contract's error shape: {"error": "<ExceptionType>", "message": str}."""
    return {"error": type(exc).__name__, "message": str(exc)}


def _isoformat(value: datetime) -> str:
    return value.isoformat()


# Datetimes on the wire: ISO 8601 with an explicit "+00:00" offset (pydantic would write "Z").
IsoDateTime = Annotated[datetime, PlainSerializer(_isoformat, return_type=str, when_used="json")]
