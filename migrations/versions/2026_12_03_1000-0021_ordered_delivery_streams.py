"""ordered delivery streams

Issue 27: an endpoint may order its deliveries (one stream, or one per ordering key). A new
``streams`` table hands out each stream's sequence numbers and names its head; deliveries
gain their stream, number and the producer's ordering key, and a delivery waiting behind its
stream's head has no ``next_attempt_at`` (its own not-before time is kept in
``deliver_after``). Every new column is nullable or has a constant default (no rewrite); the
checks are added NOT VALID and validated after, the index is built concurrently, so nothing
holds a strong lock on ``deliveries`` for long.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03 10:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ENDPOINT_CHECKS = (
    ("ck_endpoints_ordering", "ordering IN ('none', 'endpoint', 'key')"),
    ("ck_endpoints_on_dead", "on_dead IN ('halt', 'skip')"),
)
_DELIVERY_CHECKS = (
    ("ck_deliveries_stream_seq", "(stream IS NULL) = (stream_seq IS NULL)"),
    # Only a delivery waiting behind its stream's head goes without a schedule.
    ("ck_deliveries_scheduled", "next_attempt_at IS NOT NULL OR stream IS NOT NULL"),
)


def upgrade() -> None:
    op.add_column(
        "endpoints", sa.Column("ordering", sa.Text(), server_default="none", nullable=False)
    )
    op.add_column(
        "endpoints", sa.Column("on_dead", sa.Text(), server_default="halt", nullable=False)
    )
    for column in (
        sa.Column("ordering_key", sa.Text(), nullable=True),
        sa.Column("stream", sa.Text(), nullable=True),
        sa.Column("stream_seq", sa.BigInteger(), nullable=True),
        sa.Column("deliver_after", sa.DateTime(timezone=True), nullable=True),
    ):
        op.add_column("deliveries", column)
    op.alter_column("deliveries", "next_attempt_at", nullable=True)
    op.create_table(
        "streams",
        sa.Column("endpoint_id", sa.Text(), nullable=False),
        sa.Column("stream", sa.Text(), nullable=False),
        sa.Column("next_seq", sa.BigInteger(), nullable=False),
        sa.Column("head_id", sa.Text(), nullable=True),
        sa.Column("head_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("halted_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["endpoint_id"], ["endpoints.id"], name=op.f("fk_streams_endpoint_id_endpoints")
        ),
        sa.PrimaryKeyConstraint("endpoint_id", "stream", name=op.f("pk_streams")),
    )
    with op.get_context().autocommit_block():
        for table, checks in (("endpoints", _ENDPOINT_CHECKS), ("deliveries", _DELIVERY_CHECKS)):
            for name, check in checks:
                op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} CHECK ({check}) NOT VALID")
                op.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {name}")
        op.execute(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_deliveries_stream"
            " ON deliveries (endpoint_id, stream, stream_seq)"
            " WHERE completed_at IS NULL AND stream IS NOT NULL"
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_deliveries_stream")
    for table, checks in (("deliveries", _DELIVERY_CHECKS), ("endpoints", _ENDPOINT_CHECKS)):
        for name, _ in checks:
            op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
    op.drop_table("streams")
    # Deliveries waiting behind a head get a schedule back: due now, unordered.
    op.execute(
        "UPDATE deliveries SET next_attempt_at = coalesce(deliver_after, now())"
        " WHERE next_attempt_at IS NULL"
    )
    op.alter_column("deliveries", "next_attempt_at", nullable=False)
    for name in ("deliver_after", "stream_seq", "stream", "ordering_key"):
        op.drop_column("deliveries", name)
    op.drop_column("endpoints", "on_dead")
    op.drop_column("endpoints", "ordering")
