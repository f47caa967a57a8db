"""event type example

An example payload per catalogue entry: what a test event of the type carries, and what the
portal shows a customer choosing one. Nullable, no default: no table rewrite. Expand only.

Revision ID: 0043
Revises: 0042
Create Date: 2026-12-09 11:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0043"
down_revision: str | None = "0042"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE event_types ADD COLUMN IF NOT EXISTS example jsonb")


def downgrade() -> None:
    op.execute("ALTER TABLE event_types DROP COLUMN example")
