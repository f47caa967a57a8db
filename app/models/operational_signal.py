from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, Identity, Text, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class OperationalSignal(Base):
    """Something that happened to a tenant's endpoints or deliveries, written in the
    transaction that made it happen -- by a trigger (migration 0045) or by the endpoints
    service -- and turned into an operational event by the relay, which deletes it."""

    __tablename__ = "operational_signals"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(Text)
    type: Mapped[str] = mapped_column(Text)  # an operational event type (herald.*)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
