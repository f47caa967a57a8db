"""webhook handshake

An endpoint may require the CloudEvents webhook validation handshake: `webhook_origin` is the
origin its receiver consented to (NULL: none required), `webhook_allowed_rate` the rate it
allowed in requests a minute, `webhook_validated_at` when. New nullable columns; re-runnable.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-05 14:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    ("webhook_origin", "text"),
    ("webhook_allowed_rate", "integer"),
    ("webhook_validated_at", "timestamptz"),
)


def upgrade() -> None:
    for name, kind in _COLUMNS:
        op.execute(f"ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS {name} {kind}")


def downgrade() -> None:
    for name, _ in reversed(_COLUMNS):
        op.drop_column("endpoints", name)
