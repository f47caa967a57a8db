from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, LargeBinary, SmallInteger, Text, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class Event(Base):
    """One business event. Its payload bytes are stored once and sent, unchanged, by every
    delivery and every attempt that fans out from it."""

    __tablename__ = "events"
    # A partition per UTC day of ids, beside its deliveries' (they carry its millisecond);
    # each day partitioned by payload class (app/operations/repository/partitions.py).
    __table_args__ = ({"postgresql_partition_by": "RANGE (id)"},)

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    # Days its payload is kept (KEPT_WITH_RECORDS: as long as its deliveries' records),
    # decided at accept by the SQL function payload_days_of; part of the key, as each day's
    # partitions are made by it.
    payload_days: Mapped[int] = mapped_column(
        SmallInteger, primary_key=True, server_default="32767"
    )
    tenant_id: Mapped[str] = mapped_column(Text)  # no foreign key: see Delivery.tenant_id
    # The tenant's customer it was published to (NULL: none); only that customer's endpoints
    # receive it. No foreign key: the accept checked it, and events outlive their customers.
    customer_id: Mapped[str | None] = mapped_column(Text)
    event_type: Mapped[str] = mapped_column(Text)
    payload: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    # Subscribed endpoints whose filter let the event pass them by, and why:
    # [{"endpoint_id": ..., "reason": ...}]; NULL when none did.
    filtered_out: Mapped[list[dict[str, str]] | None] = mapped_column(JSONB)
    # The producer's W3C trace context at accept: every webhook request of the event carries it.
    traceparent: Mapped[str | None] = mapped_column(Text)
