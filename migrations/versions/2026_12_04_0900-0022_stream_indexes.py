"""stream indexes

Two partial indexes on `streams`, each as small as the streams it covers: retention keeps a
delivery that halts its stream (its dead head, which an operator redrives or skips) and looks
each candidate up in `ix_streams_halted_head`; an endpoint's streams page lists the streams
with a head (live work, or halted) in key order from `ix_streams_active`, however many idle
streams the endpoint has.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-04 09:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_streams_halted_head"
            " ON streams (head_id) WHERE halted_at IS NOT NULL"
        )
        op.execute(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_streams_active"
            " ON streams (endpoint_id, stream) WHERE head_id IS NOT NULL"
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_streams_active")
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_streams_halted_head")
