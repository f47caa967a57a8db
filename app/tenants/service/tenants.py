"""Tenants as other domains see them (the console's tenant picker)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.models import Tenant
from app.tenants.repository import tenants


async def get_tenant(session: AsyncSession, tenant_id: str) -> Tenant | None:
    return await tenants.get(session, tenant_id)


async def list_tenants(
    session: AsyncSession, *, limit: int, before_id: str | None = None
) -> list[Tenant]:
    """Newest first."""
    return await tenants.list_page(session, limit=limit, before_id=before_id)
