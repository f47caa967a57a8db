"""tenant rates

The intents a tenant may have accepted a second (`tenants.accept_rate`) and the attempts its
deliveries may start a second (`tenants.delivery_rate`), set by the operator; null:
HERALD_TENANT_ACCEPT_RATE and HERALD_TENANT_DELIVERY_RATE, 0: no limit. Expand only: nullable
columns under a lock_timeout. Re-runnable.

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-07 11:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0033"
down_revision: str | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '5s'")
    op.execute("ALTER TABLE tenants ADD COLUMN IF NOT EXISTS accept_rate double precision")
    op.execute("ALTER TABLE tenants ADD COLUMN IF NOT EXISTS delivery_rate double precision")


def downgrade() -> None:
    op.execute("ALTER TABLE tenants DROP COLUMN IF EXISTS delivery_rate")
    op.execute("ALTER TABLE tenants DROP COLUMN IF EXISTS accept_rate")
