"""Column types that behave the same on PostgreSQL and SQLite."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from app.errors import InvalidInput

# JSONB on PostgreSQL (containment `@>` and GIN indexes), JSON text on SQLite.
JSONType = JSON().with_variant(JSONB(), "postgresql")


# an escaped NUL in JSON text (not an escaped backslash followed by "u0000")
_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def storable_json(value: Any) -> str:
    """The engines' JSON serializer: strict JSON both databases store and query alike.

    NaN and Infinity are not JSON (PostgreSQL refuses them, SQLite's JSON functions fail on
    them later) and PostgreSQL's jsonb cannot hold a NUL character: such a value is the
    caller's bad input (400), refused before any statement runs, not a server error.
    """
    try:
        text = json.dumps(value, allow_nan=False)
    except ValueError:
        raise InvalidInput("JSON numbers must be finite (no NaN or Infinity)") from None
    # the substring test first: the look-behind regex is slow on large texts, NUL is rare
    if "\\u0000" in text and _NUL.search(text):
        raise InvalidInput("JSON strings must not contain NUL characters (\\u0000)")
    return text


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on both dialects.

    SQLite has no timezone type and hands back naive values; this normalises both ways so
    services only ever see aware UTC datetimes.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        result: datetime = value
        if result.tzinfo is None:
            return result.replace(tzinfo=UTC)
        return result.astimezone(UTC)


def utc_from_raw(value: datetime | str) -> datetime:
    """A UTCDateTime column's value as read without its type (`type_coerce(col, String)`):
    a datetime from asyncpg, the stored `YYYY-MM-DD HH:MM:SS[.ffffff]` text (UTC) on SQLite.
    For readers of many rows that convert each distinct value once (the thread log's
    replay), which the column's per-row processing would not let them do."""
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)
