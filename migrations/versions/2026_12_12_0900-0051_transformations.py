"""endpoint transformations: their versions, the endpoint's current one, and skips recorded

- ``transformations``: every version of an endpoint's transformation, never changed once
  written; a delivery is sent as the last version whose ``since`` is no later than its id.
- ``endpoints.transformation``: the current one, as the API shows it.
- ``record_attempts``: an attempt's record may end its delivery ``cancelled`` (a
  transformation that says not to send it), and then marks it completed, as it does a
  success or a death.

Additive only, under a short lock timeout; the column added only when missing. Only
``endpoints`` is locked (the function's replacement locks no table).

Revision ID: 0051
Revises: 0050
Create Date: 2026-12-12 09:00:00+00:00
"""

import importlib
from collections.abc import Sequence

from alembic import op

revision: str = "0051"
down_revision: str | None = "0050"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The record as migration 0041 wrote it, with one change: a record that ends its delivery
# ``cancelled`` completes it.
_ORDERED_RECORD = importlib.import_module(
    "migrations.versions.2026_12_09_0900-0041_ordered_record_in_one_round_trip"
)
_COMPLETES = "WHEN r.state IN ('succeeded', 'dead') THEN now() END"
_COMPLETES_TOO = "WHEN r.state IN ('succeeded', 'dead', 'cancelled') THEN now() END"
assert _ORDERED_RECORD._RECORD_ATTEMPTS.count(_COMPLETES) == 1

_COLUMN = """
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'endpoints'::regclass
                    AND attname = 'transformation' AND NOT attisdropped) THEN
    ALTER TABLE endpoints ADD COLUMN transformation text;
  END IF;
END
$$
"""


def upgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '5s'")
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS transformations (
            id text PRIMARY KEY,
            tenant_id text NOT NULL REFERENCES tenants (id),
            endpoint_id text NOT NULL,
            since text NOT NULL,
            source text,
            created_at timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS ix_transformations_endpoint_since"
        " ON transformations (endpoint_id, since)"
    )
    op.execute(_COLUMN)
    op.execute(_ORDERED_RECORD._RECORD_ATTEMPTS.replace(_COMPLETES, _COMPLETES_TOO))


def downgrade() -> None:
    op.execute(_ORDERED_RECORD._RECORD_ATTEMPTS)
    op.execute("ALTER TABLE endpoints DROP COLUMN IF EXISTS transformation")
    op.execute("DROP TABLE IF EXISTS transformations")
