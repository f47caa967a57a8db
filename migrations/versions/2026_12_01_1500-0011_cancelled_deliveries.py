"""cancelled deliveries

A new terminal state, ``cancelled`` (issue 14): the state check admits it, and the "finished"
check counts it as finished (it has a completion time). Both checks only widen, so every row
already satisfies them: each is swapped in a short transaction, NOT VALID, then validated without
blocking writes. Code of the previous release never writes the new state; a previous-release
worker cannot record an attempt that was in flight when its delivery was cancelled (its fence
asks for ``leased``), which loses that one attempt row, never a delivery.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 15:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BEFORE = {
    "ck_deliveries_state": "state IN ('pending', 'enqueued', 'leased', 'succeeded', 'dead')",
    "ck_deliveries_finished": "(state IN ('succeeded', 'dead')) = (completed_at IS NOT NULL)",
}
_AFTER = {
    "ck_deliveries_state": (
        "state IN ('pending', 'enqueued', 'leased', 'succeeded', 'dead', 'cancelled')"
    ),
    "ck_deliveries_finished": (
        "(state IN ('succeeded', 'dead', 'cancelled')) = (completed_at IS NOT NULL)"
    ),
}


def _swap(checks: dict[str, str]) -> None:
    with op.get_context().autocommit_block():
        for name, check in checks.items():
            op.execute(
                f"ALTER TABLE deliveries DROP CONSTRAINT {name},"
                f" ADD CONSTRAINT {name} CHECK ({check}) NOT VALID"
            )
            op.execute(f"ALTER TABLE deliveries VALIDATE CONSTRAINT {name}")


def upgrade() -> None:
    _swap(_AFTER)


def downgrade() -> None:
    # Cancelled rows have no place in the older schema: they become dead, for a reason that
    # says what happened.
    op.execute(
        "UPDATE deliveries SET state = 'dead', dead_reason = 'cancelled' WHERE state = 'cancelled'"
    )
    _swap(_BEFORE)
