"""event trace context

The producer's W3C traceparent, kept with the event at accept so that every webhook request of
its deliveries continues the producer's trace (issue 15). A nullable column: no rewrite.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01 21:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("events", sa.Column("traceparent", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("events", "traceparent")
