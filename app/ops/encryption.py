"""Keys in operation: the start-up check, `graphkeep encryption status` and `rotate`.

- Start-up: every key id recorded in `encryption_keys` and not retired must be configured;
  otherwise the process refuses to start with one line naming the missing key ids (a server
  that cannot open what is stored would answer errors for every thread). The current key is
  recorded the first time it is used.
- Status: rows per key id (plus `plaintext` and `legacy`) for each sealed column.
- Rotate: re-seals, in primary-key order and bounded batches, every row not sealed by the
  current key (older keys, legacy checkpoint rows, plaintext written before the key was set).
  Each batch is its own short transaction and each row is replaced only if it still holds
  the value read (a writer that got there first already wrote with the current key), so it
  runs online beside the servers, holds no lock across batches, and may be interrupted and
  re-run at any time. A backup taken mid-rotation holds rows of both keys: it is readable with
  both configured. When nothing is left under the other keys they are retired, so they may
  then be removed from the configuration.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.access import read, transaction
from app.db.sealed import DecryptionFailed, KeyMismatch, Keyring, is_sealed_text
from app.db.types import utcnow
from app.ops import encryption_queries as q
from app.ops.encryption_queries import LEGACY, PLAINTEXT, TARGETS, Target

log = logging.getLogger(__name__)

DEFAULT_BATCH = 500
_SERDE_CIPHER = "gk1"


async def check_keys(engine: AsyncEngine, keyring: Keyring) -> None:
    """Refuse a configuration lacking a key that still seals stored state; record the
    current key. Raises KeyMismatch with one line for the operator."""
    async with read(engine) as conn:
        rows = (await conn.execute(q.key_rows())).all()
    known = {r.key_id: r.retired_at for r in rows}
    live = sorted(k for k, retired in known.items() if retired is None)
    missing = [k for k in live if k not in keyring.ciphers]
    if missing:
        names = ", ".join(missing)
        if not keyring.enabled:
            raise KeyMismatch(
                f"the database holds state encrypted with key {names}; "
                "set GRAPHKEEP_ENCRYPTION_KEY to that key to start"
            )
        raise KeyMismatch(
            f"GRAPHKEEP_ENCRYPTION_KEY (key {keyring.current}) cannot read state encrypted "
            f"with key {names}; set that key, or add it to GRAPHKEEP_ENCRYPTION_OLD_KEYS"
        )
    current = keyring.current
    if current is None:
        return
    if current not in known:
        try:
            async with transaction(engine) as conn:
                await conn.execute(q.add_key(), {"key_id": current, "created_at": utcnow()})
        except IntegrityError:
            pass  # another process recorded it first
    elif known[current] is not None:
        async with transaction(engine) as conn:
            await conn.execute(q.revive_key(current))


@dataclass
class Status:
    """Rows per key label, by sealed column."""

    columns: dict[str, dict[str, int]] = field(default_factory=dict)

    def totals(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for counts in self.columns.values():
            for label, n in counts.items():
                out[label] = out.get(label, 0) + n
        return out

    def to_json(self, current: str | None) -> dict[str, Any]:
        return {"current_key": current, "totals": self.totals(), "columns": self.columns}


async def status(engine: AsyncEngine) -> Status:
    dialect = engine.dialect.name
    result = Status()
    async with read(engine) as conn:
        for target in TARGETS:
            counts: dict[str, int] = {}
            for label, n in (await conn.execute(q.count_by_key(target, dialect))).all():
                if label is not None:
                    counts[str(label)] = counts.get(str(label), 0) + int(n)
            result.columns[target.name] = counts
    return result


@dataclass
class RotateReport:
    resealed: int = 0
    # changed by a writer between read and update (already current); counted on SQLite only
    skipped: int = 0
    seconds: float = 0.0
    retired: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        rate = self.resealed / self.seconds if self.seconds else 0.0
        return {
            "resealed": self.resealed,
            "skipped": self.skipped,
            "seconds": round(self.seconds, 3),
            "rows_per_second": round(rate, 1),
            "retired_keys": self.retired,
        }


async def rotate(
    engine: AsyncEngine,
    keyring: Keyring,
    *,
    batch_size: int = DEFAULT_BATCH,
    progress: Callable[[str, int], None] | None = None,
) -> RotateReport:
    """Re-seal every row not sealed by the current key (see the module docstring)."""
    if not keyring.enabled:
        raise KeyMismatch("rotation needs GRAPHKEEP_ENCRYPTION_KEY (the key to seal with)")
    await check_keys(engine, keyring)
    report = RotateReport()
    started = time.perf_counter()
    dialect = engine.dialect.name
    for target in TARGETS:
        done = await _rotate_target(engine, dialect, keyring, target, batch_size, report)
        if progress is not None:
            progress(target.name, done)
    left = (await status(engine)).totals()
    stale = [k for k in left if k not in (keyring.current, PLAINTEXT) and left[k] > 0]
    if not stale:
        report.retired = await _retire_others(engine, keyring)
    report.seconds = time.perf_counter() - started
    return report


async def _rotate_target(
    engine: AsyncEngine,
    dialect: str,
    keyring: Keyring,
    target: Target,
    batch_size: int,
    report: RotateReport,
) -> int:
    after: tuple[Any, ...] | None = None
    done = 0
    statement = q.reseal(target)
    pk_names = [c.name for c in target.pk]
    while True:
        query = q.needing_rotation(target, dialect, keyring.current, after, batch_size)
        async with read(engine) as conn:
            rows = (await conn.execute(query)).all()
        if not rows:
            return done
        updates = [_resealed(keyring, target, row, pk_names) for row in rows]
        async with transaction(engine) as conn:  # one short transaction per batch
            result = await conn.execute(statement, updates)
        # rows a writer replaced meanwhile are left alone (the WHERE on the old value); only
        # dialects with a reliable executemany rowcount (SQLite) can say how many
        changed = result.rowcount if engine.dialect.supports_sane_multi_rowcount else len(rows)
        done += changed
        report.resealed += changed
        report.skipped += len(rows) - changed
        after = tuple(getattr(rows[-1], name) for name in pk_names)
        if len(rows) < batch_size:
            return done


def _resealed(keyring: Keyring, target: Target, row: Any, pk_names: list[str]) -> dict[str, Any]:
    params: dict[str, Any] = {f"k_{name}": getattr(row, name) for name in pk_names}
    old = row.stored
    params["old"] = old
    if target.kind == "serde":
        tag: str = row.type_tag
        base, _, cipher = tag.partition("+")
        data = bytes(old or b"")
        if cipher == _SERDE_CIPHER:
            plain = keyring.open_bytes(data)
        elif cipher:
            plain = keyring.open_legacy(data)
        else:
            plain = data
        params["new"] = keyring.seal_bytes(plain)
        params["new_type"] = f"{base}+{_SERDE_CIPHER}"
        params["old"] = data
    elif target.kind == "json":
        text = keyring.open_text(old) if is_sealed_text(old) else json.dumps(old)
        params["new"] = keyring.seal_text(text)
    else:
        text = keyring.open_text(old) if is_sealed_text(old) else str(old)
        params["new"] = keyring.seal_text(text)
    return params


async def _retire_others(engine: AsyncEngine, keyring: Keyring) -> list[str]:
    async with read(engine) as conn:
        rows = (await conn.execute(q.key_rows())).all()
    others = [r.key_id for r in rows if r.key_id != keyring.current and r.retired_at is None]
    if others:
        async with transaction(engine) as conn:
            await conn.execute(q.set_retired(others, utcnow()))
    return others


__all__ = [
    "LEGACY",
    "PLAINTEXT",
    "DecryptionFailed",
    "KeyMismatch",
    "RotateReport",
    "Status",
    "check_keys",
    "rotate",
    "status",
]
