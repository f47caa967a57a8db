"""outbox wake-ups indexed by age

The status page (when Redis cannot answer) and the relay-lag gauge ask when the region's oldest
unpublished wake-up was written. Ids follow insert order, not the order transactions began, so
the lowest id is not always the oldest row; and while Redis is down the table grows with every
accept. An index on (region, created_at) answers in one probe. The table holds only what Redis
has not been told, so it is small when this runs; built concurrently all the same, so that no
accept waits on it. Expand only.

Revision ID: 0039
Revises: 0038
Create Date: 2026-12-08 13:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0039"
down_revision: str | None = "0038"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.get_context().autocommit_block():
        # An earlier run stopped mid-build leaves an invalid index of this name: start again.
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_outbox_wakeups_age")
        op.execute(
            "CREATE INDEX CONCURRENTLY ix_outbox_wakeups_age ON outbox_wakeups (region, created_at)"
        )


def downgrade() -> None:
    op.execute("DROP INDEX ix_outbox_wakeups_age")
