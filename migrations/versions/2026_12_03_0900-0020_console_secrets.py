"""console secrets

The key the console's sign-in form tokens are signed with (issue 24), one row per purpose,
made by the first API process that needs it so that every process shares it. A new table:
nothing existing changes.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03 09:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "console_secrets",
        sa.Column("purpose", sa.Text(), nullable=False),
        sa.Column("secret", sa.LargeBinary(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("purpose", name=op.f("pk_console_secrets")),
    )


def downgrade() -> None:
    op.drop_table("console_secrets")
