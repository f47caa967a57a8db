"""portal session keys

The API key that minted each portal session (`portal_sessions.api_key_id`): a session ends
with the key that made it, and a tenant lists and revokes its sessions by key. Null for
sessions minted before this (they end when they expire). Expand only: a nullable column under a
lock_timeout, and an index built CONCURRENTLY for the listings. Re-runnable.

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-07 10:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0032"
down_revision: str | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '5s'")
    op.execute("ALTER TABLE portal_sessions ADD COLUMN IF NOT EXISTS api_key_id text")
    with op.get_context().autocommit_block():
        op.execute(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_portal_sessions_tenant_created"
            " ON portal_sessions (tenant_id, id)"
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_portal_sessions_tenant_created")
    op.execute("ALTER TABLE portal_sessions DROP COLUMN IF EXISTS api_key_id")
