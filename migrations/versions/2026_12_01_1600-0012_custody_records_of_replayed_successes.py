"""custody records of replayed successes

Bulk redrive may replay succeeded deliveries (issue 14): the success it clears from the row is
archived as a custody record, as a dead step is. The check on the record's event only widens:
swapped NOT VALID, then validated without blocking writes.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 16:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NAME = "ck_custody_records_event"


def _swap(check: str) -> None:
    with op.get_context().autocommit_block():
        op.execute(
            f"ALTER TABLE custody_records DROP CONSTRAINT {_NAME},"
            f" ADD CONSTRAINT {_NAME} CHECK ({check}) NOT VALID"
        )
        op.execute(f"ALTER TABLE custody_records VALIDATE CONSTRAINT {_NAME}")


def upgrade() -> None:
    _swap("event IN ('dead', 'succeeded', 'redriven')")


def downgrade() -> None:
    op.execute("DELETE FROM custody_records WHERE event = 'succeeded'")
    _swap("event IN ('dead', 'redriven')")
