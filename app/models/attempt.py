from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    Identity,
    Index,
    Integer,
    PrimaryKeyConstraint,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base
from app.core.states import OUTCOMES


class Attempt(Base):
    """The audit trail: one row per HTTP attempt, written with the state transition it caused."""

    __tablename__ = "attempts"
    __table_args__ = (
        # An attempt is its delivery's numbered claim: no surrogate key (an index less to write).
        PrimaryKeyConstraint("delivery_id", "attempt_number", name="pk_attempts"),
        # Per-destination statistics over recent attempts.
        Index("ix_attempts_endpoint_started", "endpoint_id", "started_at"),
        # The fleet's recent attempts (the console's chart): time-ordered rows, a BRIN index.
        Index(
            "ix_attempts_started_brin",
            "started_at",
            postgresql_using="brin",
            postgresql_with={"autosummarize": "on"},
        ),
        CheckConstraint(
            "outcome IN (" + ", ".join(repr(o) for o in OUTCOMES) + ")", name="outcome"
        ),
        # Partitioned by its delivery's id: a day's attempts go (and are dropped) with the
        # day's deliveries.
        {"postgresql_partition_by": "RANGE (delivery_id)"},
    )

    # Kept, unread, for the release before, whose model names it the key; dropped by the next
    # release's contract migration.
    id: Mapped[int] = mapped_column(BigInteger, Identity())
    # No foreign key: a key into a partitioned table costs each insert a lookup in it, and
    # would forbid dropping a day (docs/decisions.md, "Tables partitioned by day").
    delivery_id: Mapped[str] = mapped_column(Text)
    # Denormalised from the delivery so that an endpoint's statistics need no join.
    endpoint_id: Mapped[str | None] = mapped_column(Text)
    attempt_number: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    duration_ms: Mapped[int] = mapped_column(Integer)
    status_code: Mapped[int | None] = mapped_column(Integer)
    outcome: Mapped[str] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    # At most 4 KiB of the response, NUL bytes stripped (PostgreSQL text cannot hold them).
    response_body: Mapped[str | None] = mapped_column(Text)
