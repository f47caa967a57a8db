"""tenant cloudevents source

The CloudEvents ``source`` a tenant's events carry (null: ``urn:herald:tenant:<id>``). Nullable,
no default: no table rewrite. Expand only.

Revision ID: 0044
Revises: 0043
Create Date: 2026-12-09 12:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0044"
down_revision: str | None = "0043"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE tenants ADD COLUMN IF NOT EXISTS cloudevents_source text")


def downgrade() -> None:
    op.execute("ALTER TABLE tenants DROP COLUMN cloudevents_source")
