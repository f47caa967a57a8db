"""attempts by start time (BRIN)

The console's overview counts the last hour's attempts by outcome across every endpoint
(issue 16). Attempts are written in the order they start, nearly, so a BRIN index on
started_at finds the last hour in a few block ranges for a few kilobytes of index; built
concurrently, so writes go on while it builds. autosummarize: each block range is summarised
by autovacuum as soon as it fills, not only at the next VACUUM (an unsummarised range is
read whatever the query asks).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02 10:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.create_index(
            "ix_attempts_started_brin",
            "attempts",
            ["started_at"],
            postgresql_using="brin",
            postgresql_with={"autosummarize": "on"},
            postgresql_concurrently=True,
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.drop_index(
            "ix_attempts_started_brin", table_name="attempts", postgresql_concurrently=True
        )
