"""encryption_keys (the key ids that sealed stored state) and webhook_deliveries

`encryption_keys` lets start-up refuse a configuration that cannot open what is stored, and
`graphkeep encryption rotate` retire keys no row needs any more. `webhook_deliveries` records
each finished run's webhook outcome after its retries.

Revision ID: 0004
Revises: 0002
Create Date: 2026-12-01 21:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.db.types import UTCDateTime

revision: str = "0004"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "encryption_keys",
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("retired_at", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("key_id", name=op.f("pk_encryption_keys")),
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("tenant_id", sa.String(length=255), nullable=False),
        sa.Column("thread_id", sa.String(length=36), nullable=True),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("delivered_at", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_webhook_deliveries")),
    )
    op.create_index(
        "ix_webhook_deliveries_tenant",
        "webhook_deliveries",
        ["tenant_id", "created_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_webhook_deliveries_tenant", table_name="webhook_deliveries")
    op.drop_table("webhook_deliveries")
    op.drop_table("encryption_keys")
