"""redrive job customers

The customer whose portal asked for a bulk redrive (`redrive_jobs.customer_id`; null: the
tenant asked): a tenant's customers share their own two running jobs, and never take the
tenant's. Expand only: a nullable column under a lock_timeout. Re-runnable.

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-07 12:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0034"
down_revision: str | None = "0033"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '5s'")
    op.execute("ALTER TABLE redrive_jobs ADD COLUMN IF NOT EXISTS customer_id text")


def downgrade() -> None:
    op.execute("ALTER TABLE redrive_jobs DROP COLUMN IF EXISTS customer_id")
