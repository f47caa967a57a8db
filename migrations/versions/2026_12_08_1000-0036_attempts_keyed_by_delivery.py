"""attempts keyed by delivery

An attempt is named by its delivery and its number, which a unique index already held beside a
surrogate `id` primary key that nothing reads: that index becomes the primary key, and the
surrogate's index goes -- one index entry less for every attempt written. Expand only: `id`
stays, filled by its identity default, for the release before (whose model still names it the
key); the next release's contract drops the column. The new key's index is built concurrently;
the swap is metadata only, under a lock_timeout. Re-runnable.

Revision ID: 0036
Revises: 0035
Create Date: 2026-12-08 10:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0036"
down_revision: str | None = "0035"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Whether the key is still the surrogate: a run cut short after the swap has nothing left to do.
_KEYED_BY_ID = """
SELECT EXISTS (
    SELECT FROM pg_constraint c JOIN pg_attribute a
      ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey)
     WHERE c.conname = 'pk_attempts' AND a.attname = 'id'
)
"""


def upgrade() -> None:
    if not op.get_bind().execute(sa.text(_KEYED_BY_ID)).scalar_one():
        return
    # The key's index is built beside the unique constraint's (which owns its index and cannot
    # give it away), without blocking writes; the swap is then metadata only.
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_attempts_key_building")
        op.execute(
            "CREATE UNIQUE INDEX CONCURRENTLY ix_attempts_key_building"
            " ON attempts (delivery_id, attempt_number)"
        )
    op.execute("SET LOCAL lock_timeout = '5s'")
    op.execute(
        "ALTER TABLE attempts DROP CONSTRAINT pk_attempts,"
        " DROP CONSTRAINT IF EXISTS uq_attempts_delivery_number,"
        " ADD CONSTRAINT pk_attempts PRIMARY KEY USING INDEX ix_attempts_key_building"
    )


def downgrade() -> None:
    op.execute(
        "ALTER TABLE attempts DROP CONSTRAINT pk_attempts,"
        " ADD CONSTRAINT uq_attempts_delivery_number UNIQUE (delivery_id, attempt_number),"
        " ADD CONSTRAINT pk_attempts PRIMARY KEY (id)"
    )
