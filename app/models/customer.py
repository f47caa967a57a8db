from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class Customer(Base):
    """One of a tenant's own customers: the level the portal serves. Its id is the tenant's
    (its own customer id, unique within the tenant), not one Herald makes."""

    __tablename__ = "customers"

    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    name: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    # Deleted customers keep their row: their endpoints (deleted with them) still name it, and
    # the tenant may put the same id again, which brings it back with no endpoints.
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
