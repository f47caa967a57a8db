from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Integer, LargeBinary, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class IdempotencyKey(Base):
    """A client's ``Idempotency-Key``, scoped to its tenant, committed in the same transaction as
    the resource it created: a concurrent request with the same key waits on the unique index and
    then replays, so one key can never create two resources."""

    __tablename__ = "idempotency_keys"

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)  # no key: Delivery.tenant_id
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    # SHA-256 over the route, the intent's other fields and its payload as encoded (stored).
    request_hash: Mapped[bytes] = mapped_column(LargeBinary)
    resource_id: Mapped[str] = mapped_column(Text)
    response_status: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
