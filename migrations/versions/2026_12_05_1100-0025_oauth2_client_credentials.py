"""oauth2 client credentials

An endpoint may authenticate to its receiver with an OAuth2 access token (RFC 6749 4.4,
client credentials): `oauth2` holds the token endpoint, client id, scope and audience, and
`oauth2_secret_sealed` the client secret, sealed under HERALD_SECRET_KEYS. A failing token
endpoint is an attempt's own outcome, `auth_failed`: the outcome checks are widened (added
NOT VALID, then validated, so no write waits on the scan of attempts).

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-05 11:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD = "'success', 'retryable', 'unknown', 'permanent', 'blocked'"
_NEW = _OLD + ", 'auth_failed'"
_CHECKS = (
    ("attempts", "ck_attempts_outcome", "outcome IN ({})"),
    ("deliveries", "ck_deliveries_outcome", "last_outcome IS NULL OR last_outcome IN ({})"),
)


def _replace_checks(outcomes: str) -> None:
    # May run again (see 0024): a VALIDATE cut short leaves the rest committed, unstamped.
    for table, name, check in _CHECKS:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {name}")
        op.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {name} CHECK ({check.format(outcomes)}) NOT VALID"
        )
    with op.get_context().autocommit_block():
        for table, name, _ in _CHECKS:
            op.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {name}")


def upgrade() -> None:
    op.execute("ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS oauth2 jsonb")
    op.execute("ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS oauth2_secret_sealed bytea")
    _replace_checks(_NEW)


def downgrade() -> None:
    op.execute("UPDATE attempts SET outcome = 'retryable' WHERE outcome = 'auth_failed'")
    op.execute(
        "UPDATE deliveries SET last_outcome = 'retryable' WHERE last_outcome = 'auth_failed'"
    )
    _replace_checks(_OLD)
    op.drop_column("endpoints", "oauth2_secret_sealed")
    op.drop_column("endpoints", "oauth2")
