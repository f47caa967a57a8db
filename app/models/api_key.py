from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, DateTime, ForeignKey, LargeBinary, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class ApiKey(Base):
    """An API key, stored as the SHA-256 of its secret: keys are 256-bit random, so a fast hash
    is enough and lets authentication be one indexed lookup."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    # NULL for an admin key that acts on no tenant's data.
    tenant_id: Mapped[str | None] = mapped_column(ForeignKey("tenants.id"), index=True)
    # A key for one endpoint alone: it polls that endpoint and acknowledges what it read, and
    # every other route refuses it. NULL: a tenant's or an admin's key.
    endpoint_id: Mapped[str | None] = mapped_column(ForeignKey("endpoints.id"))
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    key_hash: Mapped[bytes] = mapped_column(LargeBinary, unique=True)
    # The first characters of the key, so an operator can tell keys apart without the secret.
    display_prefix: Mapped[str] = mapped_column(Text)
    label: Mapped[str | None] = mapped_column(Text)
    # Written when a request authenticates with the key and the process had not cached it, at
    # most once a minute: "last used" to within a minute plus the key cache's time.
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
