"""The NOTIFY signals between graphkeep processes: the one channel and its payload format.

Every payload is encoded and decoded here, whether a statement sends it through
`send` or embeds it as a bound parameter of its own SQL (the run-create and settle
statements send theirs inside the statement, one round trip).

Payload: `<kind>:<run_id>:<origin process>[:<thread_id>]`. Kinds:

- `q` QUEUED: a run became claimable (idle workers claim).
- `e` EVENTS: new events of a run or a status change; with the thread, so readers of the
  thread stream wake too. Without a run: new events of the thread's stream only.
- `c` CANCEL: a cancel was requested for a run (its executing worker stops it).
- `w` WATCH: a reader in another process follows the run from the database; with no run
  but a thread: a thread stream waits for that thread's next run.
- `h` HELLO / `p` PRESENT: a process announces itself (app/runs/peers.py); every other
  process answers a hello with present.

The origin lets a process ignore its own announcements (it acted on them already).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy.ext.asyncio import AsyncConnection

from app.runs import queries

NOTIFY_CHANNEL = "graphkeep"


class Kind(StrEnum):
    QUEUED = "q"
    EVENTS = "e"
    CANCEL = "c"
    WATCH = "w"
    HELLO = "h"
    PRESENT = "p"


@dataclass(frozen=True, slots=True)
class Notice:
    """One decoded payload."""

    kind: Kind
    run_id: str
    origin: str
    thread_id: str


def encode(kind: Kind | str, run_id: str = "", *, origin: str, thread_id: str = "") -> str:
    payload = f"{Kind(kind)}:{run_id}:{origin}"
    return f"{payload}:{thread_id}" if thread_id else payload


def decode(payload: str) -> Notice | None:
    """The notice, or None for a payload of an unknown kind (a newer or foreign sender)."""
    kind, run_id, origin, thread_id = (payload.split(":", 3) + ["", "", ""])[:4]
    try:
        return Notice(Kind(kind), run_id, origin, thread_id)
    except ValueError:
        return None


def queued(origin: str) -> str:
    """The payload waking idle workers (`q`)."""
    return encode(Kind.QUEUED, origin=origin)


def events(run_id: str, thread_id: str, *, origin: str) -> str:
    """The payload waking readers of a run and of its thread (`e`)."""
    return encode(Kind.EVENTS, run_id, origin=origin, thread_id=thread_id)


def thread_events(thread_id: str, *, origin: str) -> str:
    """The payload waking readers of a thread's stream only (`e` without a run): a thread
    log append, which no reader of a run's own events (run_events) would find anything in."""
    return encode(Kind.EVENTS, origin=origin, thread_id=thread_id)


async def send(conn: AsyncConnection, payload: str) -> None:
    """Send `payload` inside `conn`'s transaction (PostgreSQL delivers it on commit); nothing
    on SQLite, whose single process wakes its readers directly."""
    statement = queries.notify(conn.dialect.name)
    if statement is not None:
        await conn.execute(statement, {"channel": NOTIFY_CHANNEL, "payload": payload})
