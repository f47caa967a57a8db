from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, DateTime, Text, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base

RUN_STATUSES = ("queued", "running", "succeeded", "failed")


class ReconcileRun(Base):
    """One reconcile pass, triggered by cron (or the dev timer), with what it found per category."""

    __tablename__ = "reconcile_runs"
    __table_args__ = (
        CheckConstraint(
            "status IN (" + ", ".join(repr(s) for s in RUN_STATUSES) + ")", name="status"
        ),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    region: Mapped[str] = mapped_column(Text)
    trigger: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    counts: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
