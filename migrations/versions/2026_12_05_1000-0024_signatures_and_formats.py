"""signatures and formats

Standard Webhooks `v1a` (ed25519) per endpoint: `signature_schemes` ({v1}, {v1a} or both), the
key pair (the private key sealed under HERALD_SECRET_KEYS, the public key in the clear) and the
previous pair kept signing through a rotation's overlap; CloudEvents as payload formats
(`cloudevents`, structured; `cloudevents-binary`). Expand only: new columns with defaults or
NULL, a CHECK widened (added NOT VALID, then validated, so no write waits on the scan).

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-05 10:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FORMATS = "payload_format IN ('raw', 'standard', 'cloudevents', 'cloudevents-binary')"
_SCHEMES = "signature_schemes <@ ARRAY['v1', 'v1a'] AND cardinality(signature_schemes) >= 1"


def upgrade() -> None:
    op.add_column(
        "endpoints",
        sa.Column(
            "signature_schemes",
            sa.ARRAY(sa.Text()),
            server_default=sa.text("'{v1}'::text[]"),
            nullable=False,
        ),
    )
    for column in (
        sa.Column("signing_key_sealed", sa.LargeBinary()),
        sa.Column("public_key", sa.Text()),
        sa.Column("previous_signing_key_sealed", sa.LargeBinary()),
        sa.Column("previous_public_key", sa.Text()),
        sa.Column("previous_signing_key_expires_at", sa.DateTime(timezone=True)),
    ):
        op.add_column("endpoints", column)
    op.drop_constraint(op.f("ck_endpoints_payload_format"), "endpoints", type_="check")
    with op.get_context().autocommit_block():
        for name, check in (
            ("ck_endpoints_payload_format", _FORMATS),
            ("ck_endpoints_signature_schemes", _SCHEMES),
        ):
            op.execute(f"ALTER TABLE endpoints ADD CONSTRAINT {name} CHECK ({check}) NOT VALID")
            op.execute(f"ALTER TABLE endpoints VALIDATE CONSTRAINT {name}")


def downgrade() -> None:
    op.drop_constraint(op.f("ck_endpoints_signature_schemes"), "endpoints", type_="check")
    op.drop_constraint(op.f("ck_endpoints_payload_format"), "endpoints", type_="check")
    op.execute(
        "UPDATE endpoints SET payload_format = 'raw'"
        " WHERE payload_format IN ('cloudevents', 'cloudevents-binary')"
    )
    op.execute(
        "ALTER TABLE endpoints ADD CONSTRAINT ck_endpoints_payload_format"
        " CHECK (payload_format IN ('raw', 'standard'))"
    )
    for column in (
        "previous_signing_key_expires_at",
        "previous_public_key",
        "previous_signing_key_sealed",
        "public_key",
        "signing_key_sealed",
        "signature_schemes",
    ):
        op.drop_column("endpoints", column)
