"""a tenant's own retention, and the functions every accept and read share

- ``tenants.retention_days`` and ``tenants.payload_retention_days``: the tenant's own, within
  the operator's ``HERALD_RETENTION_DAYS`` (NULL: the operator's).
- ``payload_days_of(tenant)``: the days an accept keeps its payload, so that every accept path
  decides it alike.
- ``kept_since(tenant)``: a finished delivery the tenant still sees finished since then (its
  retention ago; -infinity when it has none of its own).

Additive only, under a short lock timeout; the columns added only when missing.

Revision ID: 0049
Revises: 0048
Create Date: 2026-12-11 11:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0049"
down_revision: str | None = "0048"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


_COLUMNS = """
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'tenants'::regclass
                    AND attname = 'payload_retention_days' AND NOT attisdropped) THEN
    ALTER TABLE tenants ADD COLUMN IF NOT EXISTS retention_days smallint,
                        ADD COLUMN IF NOT EXISTS payload_retention_days smallint;
  END IF;
END
$$
"""


def upgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '5s'")
    op.execute(_COLUMNS)
    op.execute(
        """
        CREATE OR REPLACE FUNCTION payload_days_of(tenant text) RETURNS smallint
        LANGUAGE sql STABLE PARALLEL SAFE AS $$
          SELECT coalesce((SELECT least(coalesce(payload_retention_days, 32767),
                                        coalesce(retention_days, 32767))
                             FROM tenants WHERE id = tenant), 32767)::smallint
        $$
        """
    )
    op.execute(
        """
        CREATE OR REPLACE FUNCTION kept_since(tenant text) RETURNS timestamptz
        LANGUAGE sql STABLE PARALLEL SAFE AS $$
          SELECT coalesce((SELECT now() - make_interval(days => retention_days)
                             FROM tenants WHERE id = tenant), '-infinity')
        $$
        """
    )


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS kept_since(text)")
    op.execute("DROP FUNCTION IF EXISTS payload_days_of(text)")
    op.execute(
        "ALTER TABLE tenants DROP COLUMN IF EXISTS payload_retention_days,"
        " DROP COLUMN IF EXISTS retention_days"
    )
