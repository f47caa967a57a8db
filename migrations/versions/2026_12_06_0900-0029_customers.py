"""customers

A tenant's own customers (`customers`, keyed by the tenant and the tenant's own id), the
endpoints that belong to one (`endpoints.customer_id`) and the events published to one
(`events.customer_id`). Expand only, nothing to contract: two nullable columns (no rewrite),
a new table, the foreign key added NOT VALID and validated in a transaction of its own (only
a SHARE UPDATE EXCLUSIVE lock), the ALTERs under a lock_timeout, and the customer index built
CONCURRENTLY. Deliveries are not widened: a customer's deliveries are found through its
endpoints. Re-runnable.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-06 09:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS customers (
            tenant_id text NOT NULL,
            id text NOT NULL,
            name text,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            deleted_at timestamptz,
            CONSTRAINT pk_customers PRIMARY KEY (tenant_id, id),
            CONSTRAINT fk_customers_tenant_id_tenants FOREIGN KEY (tenant_id)
                REFERENCES tenants (id)
        )
        """
    )
    # An ADD COLUMN is instant, but waits for its ACCESS EXCLUSIVE lock behind any long
    # transaction on the table, and every insert waits behind it: give up rather than stall
    # the accepts (re-run the migration).
    op.execute("SET LOCAL lock_timeout = '5s'")
    op.execute("ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS customer_id text")
    op.execute("ALTER TABLE events ADD COLUMN IF NOT EXISTS customer_id text")
    op.execute(
        """
        DO $$ BEGIN
            ALTER TABLE endpoints ADD CONSTRAINT endpoints_customer_fkey
                FOREIGN KEY (tenant_id, customer_id) REFERENCES customers (tenant_id, id)
                NOT VALID;
        EXCEPTION WHEN duplicate_object THEN NULL;
        END $$
        """
    )
    with op.get_context().autocommit_block():
        # Its own transaction: the scan holds only SHARE UPDATE EXCLUSIVE, never the locks the
        # columns above took.
        op.execute("ALTER TABLE endpoints VALIDATE CONSTRAINT endpoints_customer_fkey")
        op.execute(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_endpoints_customer_live"
            " ON endpoints (tenant_id, customer_id)"
            " WHERE deleted_at IS NULL AND customer_id IS NOT NULL"
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_endpoints_customer_live")
    op.execute("ALTER TABLE endpoints DROP CONSTRAINT IF EXISTS endpoints_customer_fkey")
    op.execute("ALTER TABLE events DROP COLUMN IF EXISTS customer_id")
    op.execute("ALTER TABLE endpoints DROP COLUMN IF EXISTS customer_id")
    op.execute("DROP TABLE IF EXISTS customers")
