"""a redriven delivery is sent as its endpoint's transformation when it was redriven

- ``deliveries.transformed_since``: set by a redrive to the least delivery id minted then, and
  read by the claim in place of the delivery's own id to find the version it is sent as.
  NULL: the version of when it was accepted.

Additive only, under a short lock timeout; added only when missing. Only ``deliveries`` is
locked.

Revision ID: 0052
Revises: 0051
Create Date: 2026-12-12 10:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0052"
down_revision: str | None = "0051"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMN = """
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'deliveries'::regclass
                    AND attname = 'transformed_since' AND NOT attisdropped) THEN
    ALTER TABLE deliveries ADD COLUMN transformed_since text;
  END IF;
END
$$
"""


def upgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '5s'")
    op.execute(_COLUMN)


def downgrade() -> None:
    op.execute("ALTER TABLE deliveries DROP COLUMN IF EXISTS transformed_since")
