"""Statements of the ops tools (`graphkeep doctor`): generic over the schema's tables."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Column, LargeBinary, Select, String, Table, Text, Update, cast, select
from sqlalchemy.types import TypeDecorator

from app.db.tables import metadata


def stored_type(column: Column[Any]) -> Any:
    """The type the database holds: a decorated type's `impl` (a sealed JSON column is JSON)."""
    kind = column.type
    return kind.impl if isinstance(kind, TypeDecorator) else kind


def text_columns(table: Table) -> list[Column[Any]]:
    """The columns that hold text: JSON, Text and String ones (not blobs, numbers, times)."""
    return [
        column
        for column in table.columns
        if isinstance(stored_type(column), JSON | Text | String)
        and not isinstance(stored_type(column), LargeBinary)
    ]


def scanned_tables() -> list[Table]:
    return [table for table in metadata.sorted_tables if text_columns(table)]


def raw_text_page(table: Table, dialect: str, *, limit: int, offset: int) -> Select[Any]:
    """A page of rows: the primary key as stored, and every text column as stored.

    SQLite: as raw bytes (a column read as text fails on bytes that are not UTF-8 before we
    could look). PostgreSQL holds only valid text: as text (jsonb rendered)."""
    key = list(table.primary_key.columns)
    as_type = LargeBinary if dialect == "sqlite" else Text
    raw = [cast(column, as_type).label(column.name) for column in text_columns(table)]
    keys = [c.label(f"pk_{c.name}") for c in key]
    return select(*keys, *raw).order_by(*key).limit(limit).offset(offset)


def repair_row(table: Table, key: dict[str, Any], values: dict[str, Any]) -> Update:
    """Write the repaired `values` into the row with primary key `key`."""
    conditions = [table.c[name] == value for name, value in key.items()]
    return table.update().where(*conditions).values(**values)
