"""live index and HOT-friendly deliveries

The expand step of moving the live-delivery indexes off ``state`` (the wake-up engine): three
partial indexes keyed on ``completed_at`` and ``dead_reason`` rather than ``state``, room on each page
for HOT updates, and two checks that make "completed_at IS NULL" mean "live" and "dead_reason IS
NOT NULL" mean "dead" -- which is what lets queries reach the new indexes. The old indexes on
``state`` stay until the contract migration, once no process runs the per-attempt job path.

Everything runs outside a transaction so that nothing holds a strong lock on ``deliveries`` for
long: indexes are built concurrently, the checks are added NOT VALID (new writes are checked at
once) and validated after the data fix, which runs in short batches of its own.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 09:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEXES = (
    # The claim's order, its probes and reconcile's scan by destination: live rows only.
    ("ix_deliveries_live", ["region", "endpoint_id", "next_attempt_at", "id"],
     "completed_at IS NULL"),
    # A tenant's `?state=` lists of live or dead deliveries, and bulk redrive.
    ("ix_deliveries_tenant_unfinished", ["tenant_id", "id"],
     "completed_at IS NULL OR dead_reason IS NOT NULL"),
    # The dead gauge and redrive's time windows.
    ("ix_deliveries_dead_since", ["region", "completed_at"], "dead_reason IS NOT NULL"),
)  # fmt: skip

_CHECKS = (
    ("ck_deliveries_finished", "(state IN ('succeeded', 'dead')) = (completed_at IS NOT NULL)"),
    ("ck_deliveries_dead_reason", "(state = 'dead') = (dead_reason IS NOT NULL)"),
)

# Every code path already writes these columns with the state; this repairs rows written by
# hand or by older code, in either direction, so that VALIDATE cannot fail on them.
_REPAIR = """
UPDATE deliveries
   SET completed_at = CASE WHEN state IN ('succeeded', 'dead')
                           THEN coalesce(completed_at, updated_at) END,
       dead_reason = CASE WHEN state = 'dead' THEN coalesce(dead_reason, 'unknown') END
 WHERE id > :after AND id <= :last
   AND NOT ((state IN ('succeeded', 'dead')) = (completed_at IS NOT NULL)
            AND (state = 'dead') = (dead_reason IS NOT NULL))
"""

# Rows per repair statement: a walk along the primary key, each step its own short transaction.
_REPAIR_BATCH = 5000


def _repair_rows() -> None:
    connection = op.get_bind()
    after = ""
    while True:
        last = connection.execute(
            sa.text(
                "SELECT max(id) FROM (SELECT id FROM deliveries WHERE id > :after"
                " ORDER BY id LIMIT :n) AS page"
            ),
            {"after": after, "n": _REPAIR_BATCH},
        ).scalar()
        if last is None:
            return
        connection.execute(sa.text(_REPAIR), {"after": after, "last": last})
        after = last


def upgrade() -> None:
    with op.get_context().autocommit_block():
        for name, check in _CHECKS:
            op.execute(f"ALTER TABLE deliveries ADD CONSTRAINT {name} CHECK ({check}) NOT VALID")
        _repair_rows()
        for name, _ in _CHECKS:
            op.execute(f"ALTER TABLE deliveries VALIDATE CONSTRAINT {name}")
        # Free room on each page lets an update that changes no indexed column stay on its page
        # (HOT); a busy table is vacuumed sooner, so that room comes back.
        op.execute(
            "ALTER TABLE deliveries SET (fillfactor = 75, autovacuum_vacuum_scale_factor = 0.02)"
        )
        for name, columns, where in _INDEXES:
            op.create_index(
                name,
                "deliveries",
                columns,
                unique=False,
                postgresql_where=sa.text(where),
                postgresql_concurrently=True,
            )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        for name, _, _ in reversed(_INDEXES):
            op.drop_index(name, table_name="deliveries", postgresql_concurrently=True)
        op.execute("ALTER TABLE deliveries RESET (fillfactor, autovacuum_vacuum_scale_factor)")
        for name, _ in reversed(_CHECKS):
            op.drop_constraint(op.f(name), "deliveries", type_="check")  # named in full
    # The repaired rows stay repaired: they satisfy the older schema as well.
