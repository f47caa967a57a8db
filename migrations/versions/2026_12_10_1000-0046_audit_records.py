"""audit records

The audit trail (app/audit/): every change to a tenant's configuration, who made it, before and
after. A table of its own, not partitioned: configuration changes are few, and its retention
deletes by id range (ids are time-ordered). Expand only.

Revision ID: 0046
Revises: 0045
Create Date: 2026-12-10 10:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0046"
down_revision: str | None = "0045"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS audit_records (
            id text PRIMARY KEY,
            tenant_id text NOT NULL,
            actor_kind text NOT NULL,
            actor_id text,
            action text NOT NULL,
            subject_id text,
            before jsonb,
            after jsonb,
            created_at timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS ix_audit_records_tenant ON audit_records (tenant_id, id)"
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS audit_records")
