"""what a tenant's retention needs: its settings, each event's payload days, and the floors

- ``tenants.retention_days`` and ``tenants.payload_retention_days``: the tenant's own, within
  the operator's ``HERALD_RETENTION_DAYS`` (NULL: the operator's).
- ``events.payload_days``: how many days the event's payload is kept, decided at accept
  (32767: as long as its deliveries' records). Each day of events made from the next
  migration on is partitioned by it, so that a class of payloads goes as a table.
- ``deliveries.payload_days``: the same number, copied, so that the claim's join finds the
  event in one class and retention asks which classes live deliveries still need.
- ``payload_days_of(tenant)``: the number an accept writes, so that every accept path decides
  it alike. ``kept_since(tenant)``: a finished delivery the tenant still sees finished since
  then (its retention ago; -infinity when it has none of its own).

Additive only (IF NOT EXISTS, CREATE OR REPLACE): the release before runs on it unchanged,
its inserts taking the defaults; cut short by its lock timeout, it is run again.

Revision ID: 0047
Revises: 0046
Create Date: 2026-12-11 09:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0047"
down_revision: str | None = "0046"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Adding a column locks its table (and every partition) for a moment: waiting behind a
    # long read would queue every accept and claim behind it, so it gives up instead, to be
    # run again.
    op.execute("SET LOCAL lock_timeout = '5s'")
    op.execute(
        "ALTER TABLE tenants ADD COLUMN IF NOT EXISTS retention_days smallint,"
        " ADD COLUMN IF NOT EXISTS payload_retention_days smallint"
    )
    # A constant default: a catalogue change, no table rewrite, on every partition alike.
    for table in ("events", "deliveries"):
        op.execute(
            f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS payload_days smallint"
            " NOT NULL DEFAULT 32767"
        )
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
    for table in ("deliveries", "events"):
        op.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS payload_days")
    op.execute(
        "ALTER TABLE tenants DROP COLUMN IF EXISTS payload_retention_days,"
        " DROP COLUMN IF EXISTS retention_days"
    )
