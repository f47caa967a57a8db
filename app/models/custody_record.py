from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    Identity,
    Integer,
    PrimaryKeyConstraint,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base

CUSTODY_RECORD_EVENTS = ("dead", "succeeded", "redriven")


class CustodyRecord(Base):
    """What a delivery's own row forgets. A redrive clears the row's finish (dead: its time and
    reason; succeeded, for a replay: its time), so it archives that step here, and itself, in the
    statement that revives the row.
    The rest of the custody timeline comes from the delivery and its attempts."""

    __tablename__ = "custody_records"
    __table_args__ = (
        # Keyed by delivery first: a partitioned table's key holds its partition key.
        PrimaryKeyConstraint("delivery_id", "id", name="pk_custody_records"),
        CheckConstraint(
            "event IN (" + ", ".join(repr(e) for e in CUSTODY_RECORD_EVENTS) + ")", name="event"
        ),
        {"postgresql_partition_by": "RANGE (delivery_id)"},  # beside its delivery's day
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity())
    delivery_id: Mapped[str] = mapped_column(Text)  # no foreign key: see Attempt.delivery_id
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    event: Mapped[str] = mapped_column(Text)
    # The delivery's attempt count then: for a finish, the number of the claim that ended it.
    attempt_number: Mapped[int] = mapped_column(Integer)
    detail: Mapped[str | None] = mapped_column(Text)
