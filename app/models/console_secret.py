from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, LargeBinary, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class ConsoleSecret(Base):
    """A key the console signs with: made by the first API process that needs it, then read by
    every process, so that one process checks what another issued (a load balancer may send
    the sign-in page and its post to different ones). Today one row: the sign-in form's tokens
    (app/console/service/sign_in_forms.py)."""

    __tablename__ = "console_secrets"

    purpose: Mapped[str] = mapped_column(Text, primary_key=True)
    # Sealed under HERALD_SECRET_KEYS for the purpose "console:<purpose>" (app/core/sealing.py).
    sealed: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
