"""crons: deleted with their assistant or thread (ON DELETE CASCADE), and a last_error column

As on the official server (its cron table references assistant and thread ON DELETE CASCADE),
deleting an assistant or a thread deletes its crons in the delete's own transaction: no
service has to remember to. `last_error` says why the cron's last due time failed to fire
(a bad payload, a graph not registered, a payload that does not decrypt); the next firing
that succeeds clears it. SQLite needs the table rebuilt for new constraints (batch mode).

Revision ID: 0008
Revises: 0006
Create Date: 2026-12-02 01:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # crons left behind by deletes before this revision (status assistant_deleted /
    # thread_deleted) would violate the new keys: they are what the cascade now removes
    op.execute(
        "DELETE FROM crons WHERE assistant_id NOT IN (SELECT assistant_id FROM assistants)"
        " OR (thread_id IS NOT NULL AND thread_id NOT IN (SELECT thread_id FROM threads))"
    )
    with op.batch_alter_table("crons") as batch:
        batch.add_column(sa.Column("last_error", sa.Text(), nullable=True))
        batch.create_foreign_key(
            "fk_crons_assistant_id_assistants",
            "assistants",
            ["assistant_id"],
            ["assistant_id"],
            ondelete="CASCADE",
        )
        batch.create_foreign_key(
            "fk_crons_thread_id_threads",
            "threads",
            ["thread_id"],
            ["thread_id"],
            ondelete="CASCADE",
        )
    # the cascades look crons up by their parent: without these a delete scans crons
    op.create_index("ix_crons_assistant_id", "crons", ["assistant_id"], unique=False)
    op.create_index("ix_crons_thread_id", "crons", ["thread_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_crons_thread_id", table_name="crons")
    op.drop_index("ix_crons_assistant_id", table_name="crons")
    with op.batch_alter_table("crons") as batch:
        batch.drop_constraint("fk_crons_thread_id_threads", type_="foreignkey")
        batch.drop_constraint("fk_crons_assistant_id_assistants", type_="foreignkey")
        batch.drop_column("last_error")
