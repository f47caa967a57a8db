"""deliveries.payload_days: their event's, copied

So that the claim's join finds the event in one payload class, and retention asks which
classes live deliveries still need.

One table a migration, each its own transaction: an accept locks events before deliveries and a
claim deliveries before events, so a transaction altering both would wait on one while holding
the other, and deadlock with them. The column is added only when missing (a catalogue read
first, no lock when it is there), under a short lock timeout: cut short, it is run again.
Additive only: the release before runs on it unchanged, its inserts taking the default.

Revision ID: 0048
Revises: 0047
Create Date: 2026-12-11 10:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0048"
down_revision: str | None = "0047"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Without the catalogue read, ADD COLUMN IF NOT EXISTS would take the table's lock even when
# the column is there.
_ADD = """
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'deliveries'::regclass
                    AND attname = 'payload_days' AND NOT attisdropped) THEN
    ALTER TABLE deliveries ADD COLUMN payload_days smallint NOT NULL DEFAULT 32767;
  END IF;
END
$$
"""


def upgrade() -> None:
    # A constant default: a catalogue change, no rewrite, on every partition alike.
    op.execute("SET LOCAL lock_timeout = '5s'")
    op.execute(_ADD)


def downgrade() -> None:
    op.execute("ALTER TABLE deliveries DROP COLUMN IF EXISTS payload_days")
