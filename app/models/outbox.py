from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, Identity, Index, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class OutboxWakeup(Base):
    """A committed wake-up of a destination, not yet told to Redis. It is written in the
    transaction that made deliveries there due (an accept, a redrive, a stream handed on): one
    row for each transaction and destination, however many deliveries -- so a crash before the
    publish leaves it as the recovery record. Publishing arms the destination, then deletes the
    row: the table holds only what Redis has not been told, and no delivery row is touched."""

    __tablename__ = "outbox_wakeups"
    # No foreign keys, and one index beside the key: the relay pages by id, and the status page
    # and the relay-lag gauge ask when the oldest unpublished row was written. Ids are taken in
    # insert order, not in the order transactions began, so the oldest by id is not always the
    # oldest written; with Redis down this table grows, and the answer must stay one probe.
    __table_args__ = (Index("ix_outbox_wakeups_age", "region", "created_at"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    region: Mapped[str] = mapped_column(Text)
    tenant_id: Mapped[str] = mapped_column(Text)
    endpoint_id: Mapped[str] = mapped_column(Text)
    # When the destination's first delivery of that transaction is due.
    run_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    # A relay's short claim while it publishes, so that concurrent relays split the work;
    # a relay that dies mid-publish loses its claim when this passes. The API's fast path
    # publishes without one: its rows are younger than any relay takes.
    claimed_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
