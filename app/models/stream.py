from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, ForeignKey, Index, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class Stream(Base):
    """One ordered stream of an endpoint: the numbers it hands out and the delivery
    it waits on. Its row's lock is what orders the stream -- an accept takes its number under
    it, and whatever ends the head hands the stream on under it (docs/decisions.md)."""

    __tablename__ = "streams"
    # Retention looks up whether a delivery halts a stream before purging it; an endpoint's
    # streams page lists the ones with a head (migration 0022).
    __table_args__ = (
        Index("ix_streams_halted_head", "head_id", postgresql_where=text("halted_at IS NOT NULL")),
        Index(
            "ix_streams_active",
            "endpoint_id",
            "stream",
            postgresql_where=text("head_id IS NOT NULL"),
        ),
    )

    endpoint_id: Mapped[str] = mapped_column(ForeignKey("endpoints.id"), primary_key=True)
    # '' for the endpoint's one stream (ordering "endpoint") or its keyless one ("key").
    stream: Mapped[str] = mapped_column(Text, primary_key=True)
    next_seq: Mapped[int] = mapped_column(BigInteger)  # the number the next accept gets
    # The delivery the stream waits on: live, or dead and halting it; NULL when nothing of the
    # stream is live. Since when it has been the head.
    head_id: Mapped[str | None] = mapped_column(Text)
    head_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    halted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
