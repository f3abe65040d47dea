"""`graphkeep doctor`: find (and with `--fix` repair) rows earlier versions stored with text
that cannot be read back.

Before the boundary check (app/db/storable.py), SQLite accepted lone surrogates (as `\\ud800`
escapes in JSON text, or raw CESU-8 bytes) and NULs; such a row then failed every read of it
(a thread's get, search and copy, a thread's run list) for good. PostgreSQL's `jsonb` and
`text` never accepted them, so there the scan finds nothing; it runs on both dialects.

The repair is the smallest change that makes a row readable: undecodable bytes and lone
surrogates become U+FFFD, NULs are dropped, in values and in object keys. Primary-key
columns are only reported (rewriting a key could collide with another row).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import JSON, Table
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.access import read, transaction
from app.db.storable import text_problem, value_problem
from app.ops import queries

PAGE_ROWS = 500
REPLACEMENT = "\ufffd"


@dataclass(frozen=True)
class Finding:
    table: str
    key: dict[str, Any]
    column: str
    problem: str
    fixed: bool = False

    def line(self) -> str:
        key = ", ".join(f"{k}={_printable(v)}" for k, v in self.key.items())
        done = " (fixed)" if self.fixed else ""
        return f"{self.table} [{key}] {self.column}: {self.problem}{done}"


def _printable(value: Any) -> str:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return clean_text(text).encode("unicode_escape").decode()[:80]


def clean_text(value: str) -> str:
    """`value` without NULs and with every surrogate code point replaced by U+FFFD."""
    if value.isascii() and "\x00" not in value:
        return value
    out = value.replace("\x00", "")
    return "".join(REPLACEMENT if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in out)


def clean_value(value: Any) -> Any:
    """A decoded JSON value with every string (and key) cleaned."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(k): clean_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_value(v) for v in value]
    return value


def _inspect(raw: bytes, is_json: bool) -> tuple[str | None, Any]:
    """(problem, repaired value) of one stored cell; (None, None) when it reads back fine."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "surrogateescape")  # keeps the bad bytes visible
        problem: str | None = "stored bytes are not UTF-8 (raw surrogates or invalid bytes)"
    else:
        problem = None
    if not is_json:
        problem = problem or (f"text contains {p}" if (p := text_problem(text)) else None)
        return problem, (clean_text(text) if problem else None)
    try:
        value = json.loads(text)
    except ValueError:
        return problem or "not valid JSON", None
    problem = problem or value_problem(value, "value")
    return problem, (clean_value(value) if problem else None)


async def _scan_table(engine: AsyncEngine, table: Table, fix: bool) -> list[Finding]:
    columns = {
        c.name: isinstance(queries.stored_type(c), JSON) for c in queries.text_columns(table)
    }
    key_names = [c.name for c in table.primary_key.columns]
    findings: list[Finding] = []
    offset = 0
    while True:
        async with read(engine) as conn:
            rows = (
                (
                    await conn.execute(
                        queries.raw_text_page(
                            table, engine.dialect.name, limit=PAGE_ROWS, offset=offset
                        )
                    )
                )
                .mappings()
                .all()
            )
        for row in rows:
            key = {name: row[f"pk_{name}"] for name in key_names}
            repairs: dict[str, Any] = {}
            for name, is_json in columns.items():
                raw = row[name]
                if raw is None:
                    continue
                stored = raw.encode() if isinstance(raw, str) else bytes(raw)
                problem, repaired = _inspect(stored, is_json)
                if problem is None:
                    continue
                fixable = fix and repaired is not None and name not in key_names
                if fixable:
                    repairs[name] = repaired
                findings.append(Finding(table.name, key, name, problem, fixed=fixable))
            if repairs:
                async with transaction(engine) as conn:
                    await conn.execute(queries.repair_row(table, key, repairs))
        if len(rows) < PAGE_ROWS:
            return findings
        offset += PAGE_ROWS


async def run_doctor(engine: AsyncEngine, *, fix: bool) -> list[Finding]:
    """Every unreadable cell of every table (repaired when `fix`)."""
    findings: list[Finding] = []
    for table in queries.scanned_tables():
        findings += await _scan_table(engine, table, fix)
    return findings
