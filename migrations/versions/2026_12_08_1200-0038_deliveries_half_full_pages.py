"""deliveries on half-full pages

A delivery's row is written three times in its life: inserted, claimed, recorded. A batch's rows
fill their pages together and are claimed together, so at a fillfactor of 75 only ~40 % of a
batch's claims found room on their page for a HOT update; the rest wrote an entry into every
index. At 50 every claim fits. New pages only: existing rows keep theirs. Expand only, metadata.

Revision ID: 0038
Revises: 0037
Create Date: 2026-12-08 12:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0038"
down_revision: str | None = "0037"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("SET LOCAL lock_timeout = '5s'")
    # Run again over a partitioned table (an upgrade resumed past 0040), there is nothing to
    # do: a partitioned table takes no storage parameters, each partition carries its own.
    op.execute(
        "DO $$ BEGIN IF (SELECT relkind FROM pg_class WHERE oid = 'deliveries'::regclass) = 'r'"
        " THEN ALTER TABLE deliveries SET (fillfactor = 50); END IF; END $$"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE deliveries SET (fillfactor = 75)")
