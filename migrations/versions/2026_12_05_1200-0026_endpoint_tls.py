"""endpoint tls

An endpoint may carry TLS material for its receiver (mutual TLS, or a CA of its own):
`tls_sealed` holds the client certificate, key and CA bundle sealed as one value under
HERALD_SECRET_KEYS, `tls` what identifies them (subjects, fingerprints, validity). Material
replaced stays a fallback until `previous_tls_expires_at`. New nullable columns only: no
rewrite, no scan; re-runnable.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-05 12:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    ("tls_sealed", "bytea"),
    ("tls", "jsonb"),
    ("previous_tls_sealed", "bytea"),
    ("previous_tls", "jsonb"),
    ("previous_tls_expires_at", "timestamptz"),
)


def upgrade() -> None:
    for name, kind in _COLUMNS:
        op.execute(f"ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS {name} {kind}")


def downgrade() -> None:
    for name, _ in reversed(_COLUMNS):
        op.drop_column("endpoints", name)
