"""sealed secrets

Every secret at rest is sealed with AES-256-GCM under HERALD_SECRET_KEYS (app/core/sealing.py,
issue 28): the endpoints' signing secrets (current and previous) and the console's signing
key. In three steps in one transaction -- expand (the sealed columns, and `secret_headers_*`
for static headers that are credentials), migrate (seal what exists, 500 rows a batch), contract
(drop the plain-text columns) -- because a plain-text secret must not outlive the upgrade by a
release. The previous release's processes cannot read the sealed columns: their claims fail
(one statement: nothing is leased, nothing lost) until they are replaced (docs/operations.md,
"Upgrading to sealed secrets").

A database with secrets and no HERALD_SECRET_KEYS is refused before anything changes.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-05 09:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BATCH = 500


def upgrade() -> None:
    op.add_column("endpoints", sa.Column("secret_sealed", sa.LargeBinary(), nullable=True))
    op.add_column("endpoints", sa.Column("previous_secret_sealed", sa.LargeBinary()))
    op.add_column("endpoints", sa.Column("secret_headers_sealed", sa.LargeBinary()))
    op.add_column(
        "endpoints",
        sa.Column(
            "secret_header_names",
            sa.ARRAY(sa.Text()),
            server_default=sa.text("'{}'::text[]"),
            nullable=False,
        ),
    )
    op.add_column("console_secrets", sa.Column("sealed", sa.LargeBinary(), nullable=True))
    # Emptied as they are sealed, before they are dropped: a dropped column's bytes stay in
    # the rows that have them (docs/operations.md: VACUUM FULL after the upgrade).
    op.alter_column("endpoints", "secret", nullable=True)
    op.alter_column("console_secrets", "secret", nullable=True)

    _seal_existing()

    op.alter_column("endpoints", "secret_sealed", nullable=False)
    op.alter_column("console_secrets", "sealed", nullable=False)
    op.drop_column("endpoints", "secret")
    op.drop_column("endpoints", "previous_secret")
    op.drop_column("console_secrets", "secret")


def _seal_existing() -> None:
    from app.core.config import load_settings  # read only when there is something to seal

    bind = op.get_bind()
    waiting = bind.execute(
        sa.text("SELECT (SELECT count(*) FROM endpoints) + (SELECT count(*) FROM console_secrets)")
    ).scalar_one()
    if not waiting:
        return
    ring = load_settings().key_ring()  # raises, in words, when HERALD_SECRET_KEYS is unset
    after = ""
    while True:
        rows = bind.execute(
            sa.text(
                "SELECT id, secret, previous_secret FROM endpoints WHERE id > :after"
                " ORDER BY id LIMIT :batch"
            ),
            {"after": after, "batch": _BATCH},
        ).all()
        if not rows:
            break
        for endpoint_id, secret, previous in rows:
            purpose = f"endpoint:{endpoint_id}:signing"
            bind.execute(
                sa.text(
                    "UPDATE endpoints SET secret_sealed = :sealed, previous_secret_sealed = :prev,"
                    " secret = NULL, previous_secret = NULL WHERE id = :id"
                ),
                {
                    "id": endpoint_id,
                    "sealed": ring.seal(secret, purpose),
                    "prev": ring.seal(previous, purpose) if previous else None,
                },
            )
        after = rows[-1][0]
    for purpose, secret in bind.execute(sa.text("SELECT purpose, secret FROM console_secrets")):
        bind.execute(
            sa.text(
                "UPDATE console_secrets SET sealed = :sealed, secret = NULL WHERE purpose = :purpose"
            ),
            {"purpose": purpose, "sealed": ring.seal(bytes(secret), f"console:{purpose}")},
        )


def downgrade() -> None:
    """Back to plain text (an operator's deliberate step): opens every secret under the ring.
    Secret headers have no plain-text column before 0023; with any stored, it is refused."""
    bind = op.get_bind()
    if bind.execute(
        sa.text("SELECT count(*) FROM endpoints WHERE secret_headers_sealed IS NOT NULL")
    ).scalar_one():
        raise RuntimeError(
            "endpoints hold secret headers, which 0022 cannot store: clear them first"
        )
    op.add_column("endpoints", sa.Column("secret", sa.Text(), nullable=True))
    op.add_column("endpoints", sa.Column("previous_secret", sa.Text()))
    op.add_column("console_secrets", sa.Column("secret", sa.LargeBinary(), nullable=True))
    rows = bind.execute(
        sa.text("SELECT id, secret_sealed, previous_secret_sealed FROM endpoints")
    ).all()
    console = bind.execute(sa.text("SELECT purpose, sealed FROM console_secrets")).all()
    if rows or console:
        from app.core.config import load_settings

        ring = load_settings().key_ring()
        for endpoint_id, sealed, previous in rows:
            purpose = f"endpoint:{endpoint_id}:signing"
            bind.execute(
                sa.text("UPDATE endpoints SET secret = :s, previous_secret = :p WHERE id = :id"),
                {
                    "id": endpoint_id,
                    "s": ring.open_text(sealed, purpose),
                    "p": ring.open_text(previous, purpose) if previous else None,
                },
            )
        for purpose, sealed in console:
            bind.execute(
                sa.text("UPDATE console_secrets SET secret = :s WHERE purpose = :purpose"),
                {"purpose": purpose, "s": ring.open(sealed, f"console:{purpose}")},
            )
    op.alter_column("endpoints", "secret", nullable=False)
    op.alter_column("console_secrets", "secret", nullable=False)
    for column in (
        "secret_sealed",
        "previous_secret_sealed",
        "secret_headers_sealed",
        "secret_header_names",
    ):
        op.drop_column("endpoints", column)
    op.drop_column("console_secrets", "sealed")
