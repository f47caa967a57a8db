"""endpoint filters

Endpoints may carry a CEL filter over the event (issue 14); an event records which subscribed
endpoints its filter passed by, and why. Two nullable columns: no rewrite, no long lock.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01 19:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("endpoints", sa.Column("filter", sa.Text(), nullable=True))
    op.add_column(
        "events",
        sa.Column("filtered_out", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    )


def downgrade() -> None:
    op.drop_column("events", "filtered_out")
    op.drop_column("endpoints", "filter")
