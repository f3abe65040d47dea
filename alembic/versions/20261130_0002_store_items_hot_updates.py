"""store_items: puts as HOT updates (no index on updated_at, a partial TTL index, fillfactor 90)

A put rewrites `updated_at`; while an index covered it, every put wrote a new entry into
each of the table's three indexes and ~65% more WAL than langgraph's own store (measured on
PostgreSQL after a checkpoint). Without it, and with the sweeper's index holding only rows
that have a TTL, a put whose page has room is a heap-only update.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 07:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_HAS_TTL = sa.text("expires_at IS NOT NULL")


def upgrade() -> None:
    with op.batch_alter_table("store_items", schema=None) as batch_op:
        batch_op.drop_index("ix_store_items_tenant_updated")
        batch_op.drop_index("ix_store_items_expires_at")
        batch_op.create_index(
            "ix_store_items_expires_at",
            ["expires_at"],
            unique=False,
            postgresql_where=_HAS_TTL,
            sqlite_where=_HAS_TTL,
        )
    if op.get_bind().dialect.name == "postgresql":
        # new rows leave room for their next version; existing pages keep theirs until
        # rewritten
        op.execute("ALTER TABLE store_items SET (fillfactor = 90)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE store_items RESET (fillfactor)")
    with op.batch_alter_table("store_items", schema=None) as batch_op:
        batch_op.drop_index("ix_store_items_expires_at")
        batch_op.create_index("ix_store_items_expires_at", ["expires_at"], unique=False)
        batch_op.create_index(
            "ix_store_items_tenant_updated", ["tenant_id", "updated_at"], unique=False
        )
