"""crons: scheduled runs, claimed by the scheduler through one index range

`ix_crons_enabled_next_run_date` makes the scheduler's idle query (enabled crons due by now)
an index range scan, however many crons are not due.

Revision ID: 0006
Revises: 0002
Create Date: 2026-12-01 22:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.db.types import JSONType, UTCDateTime

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "crons",
        sa.Column("cron_id", sa.String(36), nullable=False),
        sa.Column("tenant_id", sa.String(255), nullable=False),
        sa.Column("assistant_id", sa.String(36), nullable=False),
        sa.Column("thread_id", sa.String(36), nullable=True),
        sa.Column("user_id", sa.String(255), nullable=True),
        sa.Column("schedule", sa.String(255), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("next_run_date", UTCDateTime, nullable=True),
        sa.Column("end_time", UTCDateTime, nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("on_run_completed", sa.String(16), nullable=True),
        sa.Column("payload", JSONType, nullable=False),
        sa.Column("metadata", JSONType, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("cron_id", name="pk_crons"),
    )
    op.create_index(
        "ix_crons_enabled_next_run_date", "crons", ["enabled", "next_run_date"], unique=False
    )
    op.create_index("ix_crons_tenant_created", "crons", ["tenant_id", "created_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_crons_tenant_created", table_name="crons")
    op.drop_index("ix_crons_enabled_next_run_date", table_name="crons")
    op.drop_table("crons")
