"""threads.metadata GIN index (PostgreSQL): metadata containment without a tenant scan

Thread searches and counts filter with `metadata @> :filter`, and so does a custom auth
handler's owner filter (`{"owner": <user>}`) on every thread search of every user. Without an
index each such search reads the tenant's whole threads table (bench/auth_overhead.py: 9 ms at
10,000 threads, 66 ms at 100,000); `jsonb_path_ops` indexes exactly the `@>` operator, at
about a third of a default GIN's size. SQLite has no JSON index; nothing changes there.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02 01:50:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.create_index(
            "ix_threads_metadata",
            "threads",
            ["metadata"],
            unique=False,
            postgresql_using="gin",
            postgresql_ops={"metadata": "jsonb_path_ops"},
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_threads_metadata", table_name="threads")
