"""portal

The customer portal's sessions (`portal_sessions`: two token hashes, the link's and the
session's, never a token) and each tenant's portal settings (`portal_settings`: its name,
logo, accent colour and the origins that may frame it). New tables only; re-runnable.

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-06 10:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS portal_sessions (
            id text NOT NULL,
            tenant_id text NOT NULL,
            customer_id text NOT NULL,
            capabilities text[] NOT NULL,
            link_hash bytea NOT NULL,
            link_expires_at timestamptz NOT NULL,
            exchanged_at timestamptz,
            session_hash bytea,
            created_at timestamptz NOT NULL DEFAULT now(),
            expires_at timestamptz NOT NULL,
            revoked_at timestamptz,
            CONSTRAINT pk_portal_sessions PRIMARY KEY (id),
            CONSTRAINT fk_portal_sessions_tenant_id_tenants FOREIGN KEY (tenant_id)
                REFERENCES tenants (id),
            CONSTRAINT uq_portal_sessions_link_hash UNIQUE (link_hash),
            CONSTRAINT uq_portal_sessions_session_hash UNIQUE (session_hash),
            CONSTRAINT portal_sessions_customer_fkey FOREIGN KEY (tenant_id, customer_id)
                REFERENCES customers (tenant_id, id)
        )
        """
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS ix_portal_sessions_expires_at ON portal_sessions (expires_at)"
    )
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS portal_settings (
            tenant_id text NOT NULL,
            name text,
            logo_url text,
            logo bytea,
            logo_type text,
            accent_color text,
            allowed_origins text[] NOT NULL DEFAULT '{}'::text[],
            updated_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_portal_settings PRIMARY KEY (tenant_id),
            CONSTRAINT fk_portal_settings_tenant_id_tenants FOREIGN KEY (tenant_id)
                REFERENCES tenants (id)
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS portal_settings")
    op.execute("DROP TABLE IF EXISTS portal_sessions")
