from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Double, Integer, SmallInteger, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class Tenant(Base):
    __tablename__ = "tenants"

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    name: Mapped[str] = mapped_column(Text, unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    # What the tenant may use of a shared Herald, set by the operator (None: HERALD_TENANT_*).
    max_endpoints: Mapped[int | None] = mapped_column(Integer)
    max_endpoints_per_customer: Mapped[int | None] = mapped_column(Integer)
    max_fanout: Mapped[int | None] = mapped_column(Integer)
    accept_rate: Mapped[float | None] = mapped_column(Double)  # intents a second; 0: no limit
    delivery_rate: Mapped[float | None] = mapped_column(Double)  # attempts a second; 0: none
    # Set by the tenant: the CloudEvents source of its events (None: urn:herald:tenant:<id>).
    cloudevents_source: Mapped[str | None] = mapped_column(Text)
    # Failures in a row that make one of its endpoints "failing" (herald.endpoint.failing;
    # None: 5). Read by the trigger of migration 0045.
    failing_after: Mapped[int | None] = mapped_column(Integer)
    # Set by the tenant, within the operator's HERALD_RETENTION_DAYS (None: that): how long
    # its delivery records are shown, and how long its payloads are kept (at most as long).
    # Read by the SQL functions kept_since and payload_days_of (migration 0049).
    retention_days: Mapped[int | None] = mapped_column(SmallInteger)
    payload_retention_days: Mapped[int | None] = mapped_column(SmallInteger)
