"""endpoint final statuses

The statuses that end an endpoint's delivery at once, beside the defaults (every other 4xx
but 401, 403, 404, 408, 425 and 429): an endpoint whose 404 means "no such order" lists it,
one whose 400 is a deploy's brief error leaves it out. A column with a constant default: no
table rewrite. Expand only.

Revision ID: 0042
Revises: 0041
Create Date: 2026-12-09 10:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0042"
down_revision: str | None = "0041"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS final_statuses smallint[] NOT NULL"
        " DEFAULT '{}'"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE endpoints DROP COLUMN final_statuses")
