"""no foreign keys on the accept

The accept's rows -- events, deliveries, idempotency keys -- no longer reference tenants,
endpoints or events by foreign key. The accept reads the endpoint (and so its tenant) in the
same statement, writes an event and its deliveries together, and nothing deletes a tenant or an
endpoint (they are disabled, or soft-deleted): the keys guarded nothing that can happen. What
they cost every accept: a key-share lock written on the tenant's, the endpoint's and the event's
rows (WAL, and a MultiXact once concurrent accepts share a tenant), and a third of a batch's
insert time. Expand only: dropping a constraint changes nothing the release before relies on.
Metadata only, under a lock_timeout. Re-runnable.

Revision ID: 0037
Revises: 0036
Create Date: 2026-12-08 11:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0037"
down_revision: str | None = "0036"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_DROPPED = (
    ("deliveries", "fk_deliveries_tenant_id_tenants", "tenant_id", "tenants"),
    ("deliveries", "fk_deliveries_endpoint_id_endpoints", "endpoint_id", "endpoints"),
    ("deliveries", "fk_deliveries_event_id_events", "event_id", "events"),
    ("events", "fk_events_tenant_id_tenants", "tenant_id", "tenants"),
    ("idempotency_keys", "fk_idempotency_keys_tenant_id_tenants", "tenant_id", "tenants"),
)


def upgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '5s'")
    for table, name, _, _ in _DROPPED:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {name}")


def downgrade() -> None:
    for table, name, column, referred in _DROPPED:
        op.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {name} FOREIGN KEY ({column})"
            f" REFERENCES {referred} (id)"
        )
