from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Index, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class Transformation(Base):
    """One version of an endpoint's transformation (app/programs/transformations.py), never
    changed once written: a change writes the next. A delivery is sent as the version its
    endpoint had when the delivery was accepted -- the last whose ``since`` is no later than its
    id -- so every attempt of it, redrives too, sends the same request."""

    __tablename__ = "transformations"
    __table_args__ = (Index("ix_transformations_endpoint_since", "endpoint_id", "since"),)

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"))
    endpoint_id: Mapped[str] = mapped_column(Text)
    # The least delivery id minted once this version was saved (app.core.ids.id_floor):
    # deliveries are compared by id, which is when they were accepted.
    since: Mapped[str] = mapped_column(Text)
    # The CEL program; NULL: the transformation was removed from then on.
    source: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
