"""drop the indexes on delivery state

The contract step of moving the live-delivery indexes off ``state`` (the wake-up engine), once no
process runs the per-attempt job path: the five indexes that name ``state`` go, replaced by
migration 0009's indexes on ``completed_at`` and ``dead_reason``. No index names ``state`` or
``lease_until`` any more, so a claim, a publish mark and a give-back change no indexed column
and can be HOT updates.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 12:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As they were created (0001, 0007), for the downgrade.
_DROPPED = (
    ("ix_deliveries_tenant_state", ["tenant_id", "state", "id"], None),
    ("ix_deliveries_due", ["region", "next_attempt_at"], "state = 'pending'"),
    ("ix_deliveries_leased", ["region", "lease_until"], "state = 'leased'"),
    ("ix_deliveries_enqueued", ["region", "enqueued_at"], "state = 'enqueued'"),
    ("ix_deliveries_dead", ["region", "completed_at"], "state = 'dead'"),
)


def upgrade() -> None:
    with op.get_context().autocommit_block():
        for name, _, _ in _DROPPED:
            op.drop_index(
                name, table_name="deliveries", postgresql_concurrently=True, if_exists=True
            )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        for name, columns, where in _DROPPED:
            op.create_index(
                name,
                "deliveries",
                columns,
                unique=False,
                postgresql_where=sa.text(where) if where else None,
                postgresql_concurrently=True,
            )
