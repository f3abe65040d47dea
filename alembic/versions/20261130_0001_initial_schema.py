"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30 04:43:05.746442
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import app.db.types

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "api_keys",
        sa.Column("key_id", sa.String(length=36), nullable=False),
        sa.Column("tenant_id", sa.String(length=255), nullable=False),
        sa.Column("user_id", sa.String(length=255), nullable=False),
        sa.Column("key_hash", sa.String(length=128), nullable=False),
        sa.Column("read_only", sa.Boolean(), nullable=False),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("created_at", app.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", app.db.types.UTCDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("key_id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
    )
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.create_index("ix_api_keys_tenant", ["tenant_id"], unique=False)

    op.create_table(
        "assistants",
        sa.Column("assistant_id", sa.String(length=36), nullable=False),
        sa.Column("tenant_id", sa.String(length=255), nullable=False),
        sa.Column("graph_id", sa.String(length=255), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column(
            "config",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "context",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "metadata",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", app.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", app.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("assistant_id", name=op.f("pk_assistants")),
    )
    with op.batch_alter_table("assistants", schema=None) as batch_op:
        batch_op.create_index(
            "ix_assistants_tenant_created", ["tenant_id", "created_at"], unique=False
        )
        batch_op.create_index("ix_assistants_tenant_graph", ["tenant_id", "graph_id"], unique=False)

    op.create_table(
        "checkpoint_blobs",
        sa.Column("tenant_id", sa.String(length=255), nullable=False),
        sa.Column("thread_id", sa.String(length=255), nullable=False),
        sa.Column("checkpoint_ns", sa.String(length=255), nullable=False),
        sa.Column("channel", sa.String(length=255), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("blob", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint(
            "tenant_id",
            "thread_id",
            "checkpoint_ns",
            "channel",
            "version",
            name=op.f("pk_checkpoint_blobs"),
        ),
    )
    op.create_table(
        "checkpoint_writes",
        sa.Column("tenant_id", sa.String(length=255), nullable=False),
        sa.Column("thread_id", sa.String(length=255), nullable=False),
        sa.Column("checkpoint_ns", sa.String(length=255), nullable=False),
        sa.Column("checkpoint_id", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.String(length=255), nullable=False),
        sa.Column("idx", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("task_path", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("channel", sa.String(length=255), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=True),
        sa.Column("blob", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint(
            "tenant_id",
            "thread_id",
            "checkpoint_ns",
            "checkpoint_id",
            "task_id",
            "idx",
            name=op.f("pk_checkpoint_writes"),
        ),
    )
    op.create_table(
        "checkpoints",
        sa.Column("tenant_id", sa.String(length=255), nullable=False),
        sa.Column("thread_id", sa.String(length=255), nullable=False),
        sa.Column("checkpoint_ns", sa.String(length=255), nullable=False),
        sa.Column("checkpoint_id", sa.String(length=64), nullable=False),
        sa.Column("parent_checkpoint_id", sa.String(length=64), nullable=True),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("type", sa.String(length=32), nullable=True),
        sa.Column("checkpoint", sa.LargeBinary(), nullable=False),
        sa.Column(
            "metadata",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "value_versions",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", app.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint(
            "tenant_id", "thread_id", "checkpoint_ns", "checkpoint_id", name=op.f("pk_checkpoints")
        ),
    )
    with op.batch_alter_table("checkpoints", schema=None) as batch_op:
        batch_op.create_index("ix_checkpoints_run_id", ["run_id", "tenant_id"], unique=False)

    op.create_table(
        "run_events",
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("thread_id", sa.String(length=36), nullable=False),
        sa.Column("tenant_id", sa.String(length=255), nullable=False),
        sa.Column("event", sa.String(length=255), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("created_at", app.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("expires_at", app.db.types.UTCDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("run_id", "seq", name=op.f("pk_run_events")),
    )
    with op.batch_alter_table("run_events", schema=None) as batch_op:
        batch_op.create_index("ix_run_events_expires_at", ["expires_at"], unique=False)
        batch_op.create_index("ix_run_events_thread", ["thread_id"], unique=False)

    op.create_table(
        "store_items",
        sa.Column("tenant_id", sa.String(length=255), nullable=False),
        sa.Column(
            "prefix", sa.Text().with_variant(sa.Text(collation="C"), "postgresql"), nullable=False
        ),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column(
            "value",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", app.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", app.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("expires_at", app.db.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column("ttl_minutes", sa.Float(), nullable=True),
        sa.Column(
            "index_fields",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.PrimaryKeyConstraint("tenant_id", "prefix", "key", name=op.f("pk_store_items")),
    )
    with op.batch_alter_table("store_items", schema=None) as batch_op:
        batch_op.create_index("ix_store_items_expires_at", ["expires_at"], unique=False)
        batch_op.create_index(
            "ix_store_items_tenant_updated", ["tenant_id", "updated_at"], unique=False
        )

    op.create_table(
        "store_vectors",
        sa.Column("tenant_id", sa.String(length=255), nullable=False),
        sa.Column(
            "prefix", sa.Text().with_variant(sa.Text(collation="C"), "postgresql"), nullable=False
        ),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("field_name", sa.Text(), nullable=False),
        sa.Column("model", sa.String(length=255), nullable=False),
        sa.Column("dims", sa.Integer(), nullable=False),
        sa.Column("embedding", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", app.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint(
            "tenant_id", "prefix", "key", "field_name", name=op.f("pk_store_vectors")
        ),
    )
    op.create_table(
        "threads",
        sa.Column("thread_id", sa.String(length=36), nullable=False),
        sa.Column("tenant_id", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column(
            "metadata",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "config",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "values",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "interrupts",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "error",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("created_at", app.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", app.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("state_updated_at", app.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("ttl_minutes", sa.Float(), nullable=True),
        sa.Column("ttl_strategy", sa.String(length=16), nullable=True),
        sa.Column("expires_at", app.db.types.UTCDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("thread_id", name=op.f("pk_threads")),
    )
    with op.batch_alter_table("threads", schema=None) as batch_op:
        batch_op.create_index("ix_threads_expires_at", ["expires_at"], unique=False)
        batch_op.create_index(
            "ix_threads_tenant_created", ["tenant_id", "created_at"], unique=False
        )
        batch_op.create_index("ix_threads_tenant_status", ["tenant_id", "status"], unique=False)

    op.create_table(
        "assistant_versions",
        sa.Column("assistant_id", sa.String(length=36), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.String(length=255), nullable=False),
        sa.Column("graph_id", sa.String(length=255), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column(
            "config",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "context",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "metadata",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", app.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["assistant_id"],
            ["assistants.assistant_id"],
            name=op.f("fk_assistant_versions_assistant_id_assistants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("assistant_id", "version", name=op.f("pk_assistant_versions")),
    )
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("tenant_id", sa.String(length=255), nullable=False),
        sa.Column("thread_id", sa.String(length=36), nullable=False),
        sa.Column("assistant_id", sa.String(length=36), nullable=False),
        sa.Column("graph_id", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column(
            "metadata",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "kwargs",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("multitask_strategy", sa.String(length=16), nullable=False),
        sa.Column("created_at", app.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", app.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("available_at", app.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("started_at", app.db.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column("ended_at", app.db.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column("worker_id", sa.String(length=255), nullable=True),
        sa.Column("lease_expires_at", app.db.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column("attempt", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("cancel_action", sa.String(length=16), nullable=True),
        sa.Column("cancel_reason", sa.Text(), nullable=True),
        sa.Column(
            "error",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("temporary", sa.Boolean(), server_default=sa.text("(false)"), nullable=False),
        sa.ForeignKeyConstraint(
            ["thread_id"],
            ["threads.thread_id"],
            name=op.f("fk_runs_thread_id_threads"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_runs")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index("ix_runs_lease", ["status", "lease_expires_at"], unique=False)
        batch_op.create_index("ix_runs_status_available", ["status", "available_at"], unique=False)
        batch_op.create_index("ix_runs_tenant_created", ["tenant_id", "created_at"], unique=False)
        batch_op.create_index("ix_runs_thread_created", ["thread_id", "created_at"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_thread_created")
        batch_op.drop_index("ix_runs_tenant_created")
        batch_op.drop_index("ix_runs_status_available")
        batch_op.drop_index("ix_runs_lease")

    op.drop_table("runs")
    op.drop_table("assistant_versions")
    with op.batch_alter_table("threads", schema=None) as batch_op:
        batch_op.drop_index("ix_threads_tenant_status")
        batch_op.drop_index("ix_threads_tenant_created")
        batch_op.drop_index("ix_threads_expires_at")

    op.drop_table("threads")
    op.drop_table("store_vectors")
    with op.batch_alter_table("store_items", schema=None) as batch_op:
        batch_op.drop_index("ix_store_items_tenant_updated")
        batch_op.drop_index("ix_store_items_expires_at")

    op.drop_table("store_items")
    with op.batch_alter_table("run_events", schema=None) as batch_op:
        batch_op.drop_index("ix_run_events_thread")
        batch_op.drop_index("ix_run_events_expires_at")

    op.drop_table("run_events")
    with op.batch_alter_table("checkpoints", schema=None) as batch_op:
        batch_op.drop_index("ix_checkpoints_run_id")

    op.drop_table("checkpoints")
    op.drop_table("checkpoint_writes")
    op.drop_table("checkpoint_blobs")
    with op.batch_alter_table("assistants", schema=None) as batch_op:
        batch_op.drop_index("ix_assistants_tenant_graph")
        batch_op.drop_index("ix_assistants_tenant_created")

    op.drop_table("assistants")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_index("ix_api_keys_tenant")

    op.drop_table("api_keys")
