"""endpoint payload format and headers

Per endpoint (issue 14): the body's format (``raw``, today's, or the Standard Webhooks envelope
``standard``) and static headers sent on every attempt. Columns with constant defaults: no table
rewrite; the check is added NOT VALID and validated without blocking writes.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01 18:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "endpoints", sa.Column("payload_format", sa.Text(), server_default="raw", nullable=False)
    )
    op.add_column(
        "endpoints",
        sa.Column(
            "headers",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
    )
    with op.get_context().autocommit_block():
        op.execute(
            "ALTER TABLE endpoints ADD CONSTRAINT ck_endpoints_payload_format"
            " CHECK (payload_format IN ('raw', 'standard')) NOT VALID"
        )
        op.execute("ALTER TABLE endpoints VALIDATE CONSTRAINT ck_endpoints_payload_format")


def downgrade() -> None:
    op.drop_constraint(op.f("ck_endpoints_payload_format"), "endpoints", type_="check")
    op.drop_column("endpoints", "headers")
    op.drop_column("endpoints", "payload_format")
