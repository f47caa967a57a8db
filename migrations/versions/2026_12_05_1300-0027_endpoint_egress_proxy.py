"""endpoint egress proxy

An endpoint may name its own egress proxy in place of the operator's: `egress_proxy_sealed`
holds its URL, credentials and all, sealed under HERALD_SECRET_KEYS; `egress_proxy` the URL
less credentials and whether it has any. New nullable columns only; re-runnable.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-05 13:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS egress_proxy_sealed bytea")
    op.execute("ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS egress_proxy jsonb")


def downgrade() -> None:
    op.drop_column("endpoints", "egress_proxy")
    op.drop_column("endpoints", "egress_proxy_sealed")
