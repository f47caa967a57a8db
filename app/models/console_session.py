from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, DateTime, ForeignKey, Index, LargeBinary, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class ConsoleSession(Base):
    """A signed-in console user: an API key exchanged for a session. The browser holds a random
    token in a cookie; only its SHA-256 is stored, beside the SHA-256 of the key it came from,
    so that revoking the key ends its sessions."""

    __tablename__ = "console_sessions"
    __table_args__ = (Index("ix_console_sessions_expires_at", "expires_at"),)

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    token_hash: Mapped[bytes] = mapped_column(LargeBinary, unique=True)
    key_hash: Mapped[bytes] = mapped_column(LargeBinary)
    tenant_id: Mapped[str | None] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    is_admin: Mapped[bool] = mapped_column(Boolean)
    # The tenant whose data an admin bound to no tenant is looking at (picked in the console).
    viewing_tenant_id: Mapped[str | None] = mapped_column(
        ForeignKey("tenants.id", ondelete="SET NULL")
    )
    # Every state-changing form carries it (synchronizer token); random per session.
    csrf_token: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
