from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, ForeignKey, Identity, Index, Text, func, text
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class OutboxEntry(Base):
    """A committed intent to publish a delivery to the queue. It commits with the change that
    made the delivery due, so a crash before the publish leaves this row as the recovery record."""

    __tablename__ = "outbox"
    __table_args__ = (
        # A delivery's custody timeline lists its publications.
        Index("ix_outbox_delivery", "delivery_id"),
        Index(
            "ix_outbox_unpublished",
            "region",
            "id",
            postgresql_where=text("published_at IS NULL"),
        ),
        # At most one unpublished entry per delivery: a rediscovered delivery conflicts instead of
        # piling up duplicate publications.
        Index(
            "uq_outbox_pending_delivery",
            "delivery_id",
            unique=True,
            postgresql_where=text("published_at IS NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    delivery_id: Mapped[str] = mapped_column(ForeignKey("deliveries.id", ondelete="CASCADE"))
    region: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    published_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # A relay's short claim while it publishes, so that concurrent relays split the work;
    # a relay that dies mid-publish loses its claim when this passes.
    claimed_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
