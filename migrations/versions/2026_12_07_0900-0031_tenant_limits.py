"""tenant limits

What one tenant may use of a shared Herald, set by the operator per tenant: its endpoints
(`max_endpoints`), the endpoints of one of its customers or of its own (`max_endpoints_per_customer`),
and the deliveries one event may make (`max_fanout`). Null: the default the operator sets for
every tenant (HERALD_TENANT_*). Expand only: nullable columns, no rewrite, under a lock_timeout.
A tenant that already has more than the defaults (10,000 endpoints, 100 of one customer or of
its own) gets what it has as its own limits, so that no event it publishes today is refused
tomorrow. Re-runnable.

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-07 09:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = ("max_endpoints", "max_endpoints_per_customer", "max_fanout")


def upgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '5s'")
    for column in _COLUMNS:
        op.execute(f"ALTER TABLE tenants ADD COLUMN IF NOT EXISTS {column} integer")
    op.execute(
        """
        UPDATE tenants SET max_endpoints_per_customer = most, max_fanout = most
          FROM (SELECT tenant_id, max(n) AS most
                  FROM (SELECT tenant_id, count(*) AS n FROM endpoints
                         WHERE deleted_at IS NULL GROUP BY tenant_id, customer_id) AS each
                 GROUP BY tenant_id HAVING max(n) > 100) AS over
         WHERE tenants.id = over.tenant_id AND tenants.max_endpoints_per_customer IS NULL
        """
    )
    op.execute(
        """
        UPDATE tenants SET max_endpoints = n
          FROM (SELECT tenant_id, count(*) AS n FROM endpoints WHERE deleted_at IS NULL
                 GROUP BY tenant_id HAVING count(*) > 10000) AS over
         WHERE tenants.id = over.tenant_id AND tenants.max_endpoints IS NULL
        """
    )


def downgrade() -> None:
    for column in _COLUMNS:
        op.execute(f"ALTER TABLE tenants DROP COLUMN IF EXISTS {column}")
