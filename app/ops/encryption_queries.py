"""Statements of `graphkeep encryption status | rotate` and the start-up key check.

Every sealed column is named once here (`TARGETS`) with its table's primary key, so status,
rotation and the tests agree on what "every stored copy of state" means. Stored values are
read as they are stored (`type_coerce` past the sealing column type): the key id is in the
first bytes of each value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Column,
    ColumnElement,
    Select,
    Table,
    Text,
    Update,
    and_,
    bindparam,
    case,
    cast,
    func,
    literal,
    select,
    tuple_,
    type_coerce,
    update,
)
from sqlalchemy.types import LargeBinary

from app.db.dialect import bytes_hex
from app.db.sealed import KEY_ID_BYTES, TEXT_PREFIX
from app.db.tables import (
    checkpoint_blobs,
    checkpoint_writes,
    checkpoints,
    crons,
    encryption_keys,
    run_events,
    runs,
    store_items,
    thread_events,
    threads,
)
from app.db.types import JSONType

PLAINTEXT = "plaintext"  # status label of a row no key seals
LEGACY = "legacy"  # `<type>+aesgcm` checkpoint rows, sealed before key ids
_EMPTY_JSON = ("null", "{}", "[]")


@dataclass(frozen=True)
class Target:
    """One sealed column: `kind` json (SealedJSON), text (SealedText) or serde (the
    checkpoint serializer's type tag + bytes)."""

    table: Table
    column: str
    kind: str
    type_column: str | None = None

    @property
    def name(self) -> str:
        return f"{self.table.name}.{self.column}"

    @property
    def pk(self) -> list[Column[Any]]:
        return list(self.table.primary_key.columns)


TARGETS: tuple[Target, ...] = (
    Target(checkpoints, "checkpoint", "serde", "type"),
    Target(checkpoint_blobs, "blob", "serde", "type"),
    Target(checkpoint_writes, "blob", "serde", "type"),
    Target(threads, "values", "json"),
    Target(threads, "interrupts", "json"),
    Target(runs, "kwargs", "json"),
    Target(run_events, "data", "text"),
    Target(store_items, "value", "json"),
    Target(thread_events, "data", "text"),
    Target(crons, "payload", "json"),
)


def stored(target: Target) -> ColumnElement[Any]:
    """The column as stored (no sealing type in between)."""
    col = target.table.c[target.column]
    raw: Any = {"json": JSONType, "text": Text(), "serde": LargeBinary()}[target.kind]
    return type_coerce(col, raw)


def _key_label(target: Target, dialect: str) -> ColumnElement[str]:
    """SQL: the key id sealing a row, LEGACY, PLAINTEXT, or NULL when there is nothing to
    seal (empty values)."""
    col = target.table.c[target.column]
    if target.kind == "serde":
        tag = target.table.c[target.type_column or "type"]
        return case(
            (tag.like("%+gk1"), bytes_hex(dialect, func.substr(col, 1, KEY_ID_BYTES))),
            (tag.like("%+aesgcm"), literal(LEGACY)),
            (tag == "empty", literal(None)),
            else_=literal(PLAINTEXT),
        )
    # JSON: a sealed value is a JSON string, its text starts with a quote
    text = cast(col, Text) if target.kind == "json" else col
    lead = 2 if target.kind == "json" else 1
    prefix = ('"' if target.kind == "json" else "") + TEXT_PREFIX
    return case(
        (func.substr(text, 1, len(prefix)) == prefix,
         func.substr(text, lead + len(TEXT_PREFIX), 2 * KEY_ID_BYTES)),
        (text.is_(None), literal(None)),
        (text.in_(_EMPTY_JSON), literal(None)),
        else_=literal(PLAINTEXT),
    )  # fmt: skip


def count_by_key(target: Target, dialect: str) -> Select[str, int]:
    label = _key_label(target, dialect).label("key_id")
    return select(label, func.count()).group_by(label)


def needing_rotation(
    target: Target, dialect: str, current: str | None, after: Sequence[Any] | None, limit: int
) -> Select[Any]:
    """The next `limit` rows (primary key order, after `after`) not sealed by `current`."""
    label = _key_label(target, dialect)
    pk = target.pk
    cols: list[Any] = [*pk, stored(target).label("stored")]
    if target.type_column:
        cols.append(target.table.c[target.type_column].label("type_tag"))
    wanted = label.is_not(None) if current is None else and_(label.is_not(None), label != current)
    stmt = select(*cols).where(wanted)
    if after is not None:
        stmt = stmt.where(tuple_(*pk) > tuple_(*after))
    return stmt.order_by(*pk).limit(limit)


def reseal(target: Target) -> Update:
    """Replace one row's value if it is still the one read (a concurrent writer wins)."""
    pk = target.pk
    col = stored(target)
    where = [c == bindparam(f"k_{c.name}") for c in pk]
    raw_type = col.type
    where.append(col == bindparam("old", type_=raw_type))
    values: dict[str, Any] = {target.column: bindparam("new", type_=raw_type)}
    if target.type_column:
        values[target.type_column] = bindparam("new_type")
    return update(target.table).where(*where).values(values)


def key_rows() -> Select[Any]:
    return select(encryption_keys.c.key_id, encryption_keys.c.retired_at)


def add_key() -> Any:
    return encryption_keys.insert()


def set_retired(key_ids: Sequence[str], when: Any) -> Update:
    return (
        update(encryption_keys)
        .where(encryption_keys.c.key_id.in_(list(key_ids)))
        .values(retired_at=when)
    )


def revive_key(key_id: str) -> Update:
    return update(encryption_keys).where(encryption_keys.c.key_id == key_id).values(retired_at=None)
