from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, DateTime, ForeignKey, Integer, Text, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base

REDRIVE_STATUSES = ("queued", "running", "succeeded", "failed")


class RedriveJob(Base):
    """A bulk redrive: dead deliveries matching a filter, sent again in bounded batches."""

    __tablename__ = "redrive_jobs"
    __table_args__ = (
        CheckConstraint(
            "status IN (" + ", ".join(repr(s) for s in REDRIVE_STATUSES) + ")", name="status"
        ),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), index=True)
    region: Mapped[str] = mapped_column(Text)
    filter: Mapped[dict[str, Any]] = mapped_column(JSONB)
    # The customer whose portal asked for it; None: the tenant did.
    customer_id: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    redriven: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # The last delivery id handled: the job resumes after it, so no batch is done twice.
    cursor: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    @property
    def more(self) -> bool:
        """It stopped at the most one job may revive, with more to go (its cursor says where)."""
        return self.status == "succeeded" and self.cursor is not None
