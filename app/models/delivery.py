from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    Index,
    Integer,
    SmallInteger,
    Text,
    Uuid,
    func,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base
from app.core.payload_retention import payload_expiry
from app.core.states import DELIVERY_STATES, OUTCOMES, TERMINAL_STATES


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Delivery(Base):
    """One event to one endpoint: the unit of custody. Its id never changes from intent to the
    last attempt and is sent as ``Idempotency-Key`` and ``webhook-id`` every time."""

    __tablename__ = "deliveries"
    __table_args__ = (
        CheckConstraint(_in("state", DELIVERY_STATES), name="state"),
        CheckConstraint(f"last_outcome IS NULL OR {_in('last_outcome', OUTCOMES)}", name="outcome"),
        CheckConstraint("attempt_count >= 0", name="attempt_count"),
        # A row is finished exactly when it has a completion time, and dead exactly when it
        # has a reason: so "completed_at IS NULL" means live and "dead_reason IS NOT NULL" means
        # dead, predicates the partial indexes below can be proven from (migration 0009).
        CheckConstraint(
            f"({_in('state', TERMINAL_STATES)}) = (completed_at IS NOT NULL)", name="finished"
        ),
        CheckConstraint("(state = 'dead') = (dead_reason IS NOT NULL)", name="dead_reason"),
        CheckConstraint("(stream IS NULL) = (stream_seq IS NULL)", name="stream_seq"),
        # Only a delivery waiting behind its stream's head goes without a schedule.
        CheckConstraint("next_attempt_at IS NOT NULL OR stream IS NOT NULL", name="scheduled"),
        Index("ix_deliveries_tenant_id", "tenant_id", "id"),
        Index("ix_deliveries_endpoint", "endpoint_id", "id"),
        # Keyed on completion rather than state, so that a claim, a publish mark or a give-back
        # changes no indexed column and stays a HOT update (migrations 0009 and 0010).
        Index(
            "ix_deliveries_live",
            "region",
            "endpoint_id",
            "next_attempt_at",
            "id",
            postgresql_where=text("completed_at IS NULL"),
        ),
        Index(
            "ix_deliveries_tenant_unfinished",
            "tenant_id",
            "id",
            postgresql_where=text("completed_at IS NULL OR dead_reason IS NOT NULL"),
        ),
        Index(
            "ix_deliveries_dead_since",
            "region",
            "completed_at",
            postgresql_where=text("dead_reason IS NOT NULL"),
        ),
        # A stream's live rows in order: the next head, the depth (migration 0021).
        Index(
            "ix_deliveries_stream",
            "endpoint_id",
            "stream",
            "stream_seq",
            postgresql_where=text("completed_at IS NULL AND stream IS NOT NULL"),
        ),
        # A partition per UTC day of ids (app/operations/repository/partitions.py), each made
        # with room on its pages for a batch's claims to be HOT updates (fillfactor 50).
        {"postgresql_partition_by": "RANGE (id)"},
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    # No foreign keys: the accept reads the endpoint in its own statement and writes the event
    # with its deliveries, and no tenant or endpoint is ever deleted; a key would only lock
    # those rows on every insert (docs/decisions.md, "The accept writes no foreign key").
    tenant_id: Mapped[str] = mapped_column(Text)
    endpoint_id: Mapped[str] = mapped_column(Text)
    event_id: Mapped[str] = mapped_column(Text)
    event_type: Mapped[str] = mapped_column(Text)
    # Its event's payload_days, copied at accept: the claim finds the event in its class, and
    # retention asks which classes of payloads live deliveries still need.
    payload_days: Mapped[int] = mapped_column(SmallInteger, server_default="32767")
    # Set by a redrive: the version of its endpoint's transformation it is sent as is the one of
    # then (the last saved no later than this id), not the one of its accept (NULL).
    transformed_since: Mapped[str | None] = mapped_column(Text)
    # The region that owns this delivery: only its relays, workers and reconcilers touch it.
    region: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(Text)
    # Claims so far (each claim numbers one attempt). A redrive keeps the count, so attempt
    # numbers stay unique, and moves the floor: the budget is attempt_count - attempt_floor.
    attempt_count: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    attempt_floor: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # NULL only while the delivery waits behind its stream's head: nothing claims, wakes or
    # reconciles it until the head ends and it is given a schedule (app/streams/).
    next_attempt_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Ordered delivery. The producer's key, as sent; the stream of the endpoint it is
    # sequenced in ('' for the endpoint's one stream or its keyless one; NULL: unordered) and
    # its number there; and its own not-before time, kept for when it becomes the head.
    ordering_key: Mapped[str | None] = mapped_column(Text)
    stream: Mapped[str | None] = mapped_column(Text)
    stream_seq: Mapped[int | None] = mapped_column(BigInteger)
    deliver_after: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Fencing: a worker may record a result only while its token is the current one.
    lease_token: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Written only by the release before's publish mark; unread here, dropped by the next
    # release's contract migration.
    enqueued_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_outcome: Mapped[str | None] = mapped_column(Text)
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    dead_reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    @property
    def payload_expires_at(self) -> datetime | None:
        """When its event's payload is gone, by its tenant's setting then (None: with the
        delivery's own record). Accepted in the same statement, they share ``created_at``."""
        return payload_expiry(self.created_at, self.payload_days)
