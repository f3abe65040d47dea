"""thread_events: the thread-stream protocol's durable per-thread event log

Rows keyed (thread_id, seq) with a stable event_id, the writing run attempt, the channel
(method), the namespace and the encoded payload; `since` replay reads the primary key.
The log goes with its thread (delete, prune, TTL).

Revision ID: 0005
Revises: 0002
Create Date: 2026-12-01 22:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db.types

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "thread_events",
        sa.Column("thread_id", sa.String(36), nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("tenant_id", sa.String(255), nullable=False),
        sa.Column("event_id", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(36), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("method", sa.String(64), nullable=False),
        sa.Column("namespace", sa.Text(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("created_at", app.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("thread_id", "seq"),
    )
    op.create_index("ix_thread_events_run", "thread_events", ["run_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_thread_events_run", table_name="thread_events")
    op.drop_table("thread_events")
