from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    DateTime,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    LargeBinary,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class PortalSession(Base):
    """A customer's way into its portal, minted by the tenant's backend. Two tokens, neither
    stored: the link's (one use, minutes to live, carried in the URL's fragment) and, once the
    link is used, the session's (held in the page's memory, sent as a bearer header). Only
    their SHA-256 is kept."""

    __tablename__ = "portal_sessions"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "customer_id"],
            ["customers.tenant_id", "customers.id"],
            name="portal_sessions_customer_fkey",
        ),
        Index("ix_portal_sessions_expires_at", "expires_at"),
        Index("ix_portal_sessions_tenant_created", "tenant_id", "id"),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"))
    customer_id: Mapped[str] = mapped_column(Text)
    # What the customer may do besides reading: manage_endpoints, replay.
    capabilities: Mapped[list[str]] = mapped_column(ARRAY(Text))
    link_hash: Mapped[bytes] = mapped_column(LargeBinary, unique=True)
    link_expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # Set once, by the one statement that uses the link: a second use finds it set.
    exchanged_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    session_hash: Mapped[bytes | None] = mapped_column(LargeBinary, unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The key that minted it: the session ends when that key is revoked.
    api_key_id: Mapped[str | None] = mapped_column(Text)


class PortalSettings(Base):
    """How a tenant's portal looks and where it may be embedded."""

    __tablename__ = "portal_settings"

    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    name: Mapped[str | None] = mapped_column(Text)
    logo_url: Mapped[str | None] = mapped_column(Text)
    # An uploaded logo (PNG, JPEG or WebP, checked by its bytes), served from Herald itself.
    logo: Mapped[bytes | None] = mapped_column(LargeBinary)
    logo_type: Mapped[str | None] = mapped_column(Text)
    accent_color: Mapped[str | None] = mapped_column(Text)
    # The origins (scheme://host[:port]) whose pages may frame the portal: its CSP's
    # frame-ancestors. Empty: none may.
    allowed_origins: Mapped[list[str]] = mapped_column(
        ARRAY(Text), server_default=text("'{}'::text[]")
    )
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
