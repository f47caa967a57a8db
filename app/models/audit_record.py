from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, Index, Text, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class AuditRecord(Base):
    """One change to a tenant's configuration: who, what, before and after (app/audit/)."""

    __tablename__ = "audit_records"
    # A tenant's trail, newest first, a page at a time (ids are time-ordered).
    __table_args__ = (Index("ix_audit_records_tenant", "tenant_id", "id"),)

    id: Mapped[str] = mapped_column(Text, primary_key=True)  # aud_..., time-ordered
    tenant_id: Mapped[str] = mapped_column(Text)
    actor_kind: Mapped[str] = mapped_column(Text)  # app.core.actors.ActorKind
    actor_id: Mapped[str | None] = mapped_column(Text)
    action: Mapped[str] = mapped_column(Text)  # endpoint.updated, api_key.revoked, ...
    subject_id: Mapped[str | None] = mapped_column(Text)  # what was changed: ep_..., a name
    # The fields that changed, as they were and as they became (no secret's value): null
    # before a creation, after a deletion.
    before: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
