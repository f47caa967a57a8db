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

from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FORMATS = "payload_format IN ('raw', 'standard', 'cloudevents', 'cloudevents-binary')"
_SCHEMES = "signature_schemes <@ ARRAY['v1', 'v1a'] AND cardinality(signature_schemes) >= 1"


_COLUMNS = (
    "signature_schemes text[] NOT NULL DEFAULT '{v1}'::text[]",
    "signing_key_sealed bytea",
    "public_key text",
    "previous_signing_key_sealed bytea",
    "previous_public_key text",
    "previous_signing_key_expires_at timestamp with time zone",
)
_CHECKS = (("ck_endpoints_payload_format", _FORMATS), ("ck_endpoints_signature_schemes", _SCHEMES))


def upgrade() -> None:
    # Every step may run again: the checks are validated outside this transaction, and a
    # VALIDATE cut short leaves the rest committed with the revision not yet stamped.
    for column in _COLUMNS:
        op.execute(f"ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS {column}")
    for name, check in _CHECKS:
        op.execute(f"ALTER TABLE endpoints DROP CONSTRAINT IF EXISTS {name}")
        op.execute(f"ALTER TABLE endpoints ADD CONSTRAINT {name} CHECK ({check}) NOT VALID")
    with op.get_context().autocommit_block():
        for name, _ in _CHECKS:
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
