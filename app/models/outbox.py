from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, Identity, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class OutboxWakeup(Base):
    """A committed wake-up of a destination, not yet told to Redis. It is written in the
    transaction that made deliveries there due (an accept, a redrive, a stream handed on): one
    row for each transaction and destination, however many deliveries -- so a crash before the
    publish leaves it as the recovery record. Publishing arms the destination, then deletes the
    row: the table holds only what Redis has not been told, and no delivery row is touched."""

    __tablename__ = "outbox_wakeups"
    # The primary key is its only index, and it has no foreign keys: the relay pages by id,
    # the status page and the gauges read only the oldest row, and an index or a check more
    # would cost every accept (docs/benchmarks.md, "A delivery's cost on the primary").

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
