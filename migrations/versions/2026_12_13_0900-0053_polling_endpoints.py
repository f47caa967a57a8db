"""polling endpoints: an endpoint whose receiver reads its deliveries, and keys for one endpoint

- ``endpoints.delivery``: ``push`` (Herald sends to its URL) or ``poll`` (its receiver polls
  for its deliveries and acknowledges them); fixed once made. A polling endpoint has no URL,
  so ``url`` may now be NULL -- for a polling endpoint and only for one.
- ``api_keys.endpoint_id``: a key that acts for one endpoint alone, to poll it and acknowledge
  what it read. NULL: a tenant's or an admin's key, as before.

Additive only. Each statement is its own transaction under a short lock timeout and may run
again: ``endpoints`` is locked apart from ``api_keys``, as producers take ``endpoints`` before
the tables that follow it. The check constraint is added NOT VALID, then validated without
blocking writes.

Revision ID: 0053
Revises: 0052
Create Date: 2026-12-13 09:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0053"
down_revision: str | None = "0052"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CONSTRAINTS = """
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_constraint WHERE conname = 'ck_endpoints_delivery') THEN
    ALTER TABLE endpoints ADD CONSTRAINT ck_endpoints_delivery
      CHECK (delivery IN ('push', 'poll')) NOT VALID;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_constraint WHERE conname = 'ck_endpoints_url_unless_polled') THEN
    ALTER TABLE endpoints ADD CONSTRAINT ck_endpoints_url_unless_polled
      CHECK ((url IS NULL) = (delivery = 'poll')) NOT VALID;
  END IF;
END
$$
"""


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("SET lock_timeout = '5s'")
        # A constant default: no table rewrite.
        op.execute(
            "ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS delivery text NOT NULL DEFAULT 'push'"
        )
        op.execute("ALTER TABLE endpoints ALTER COLUMN url DROP NOT NULL")
        op.execute(_CONSTRAINTS)
        op.execute("ALTER TABLE endpoints VALIDATE CONSTRAINT ck_endpoints_delivery")
        op.execute("ALTER TABLE endpoints VALIDATE CONSTRAINT ck_endpoints_url_unless_polled")
        op.execute(
            "ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS endpoint_id text"
            " REFERENCES endpoints (id)"
        )
        op.execute("RESET lock_timeout")


def downgrade() -> None:
    op.execute("ALTER TABLE api_keys DROP COLUMN IF EXISTS endpoint_id")
    # A polling endpoint cannot be told in the earlier schema: refuse rather than invent a URL.
    op.execute(
        "DO $$ BEGIN IF EXISTS (SELECT FROM endpoints WHERE delivery = 'poll') THEN"
        " RAISE EXCEPTION 'polling endpoints exist: delete them before downgrading';"
        " END IF; END $$"
    )
    op.execute("ALTER TABLE endpoints DROP CONSTRAINT IF EXISTS ck_endpoints_url_unless_polled")
    op.execute("ALTER TABLE endpoints DROP CONSTRAINT IF EXISTS ck_endpoints_delivery")
    op.execute("ALTER TABLE endpoints ALTER COLUMN url SET NOT NULL")
    op.execute("ALTER TABLE endpoints DROP COLUMN IF EXISTS delivery")
