"""Tenants as other domains see them (the console's tenant picker), and a tenant's own settings."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.service import audit
from app.core.actors import Actor
from app.models import Tenant
from app.tenants.repository import tenants


async def get_tenant(session: AsyncSession, tenant_id: str) -> Tenant | None:
    return await tenants.get(session, tenant_id)


async def list_tenants(
    session: AsyncSession, *, limit: int, before_id: str | None = None
) -> list[Tenant]:
    """Newest first."""
    return await tenants.list_page(session, limit=limit, before_id=before_id)


async def own(session: AsyncSession, tenant_id: str) -> Tenant:
    """The caller's tenant (its key found it: it exists)."""
    tenant = await tenants.get(session, tenant_id)
    assert tenant is not None
    return tenant


async def change_own(
    session: AsyncSession, tenant_id: str, values: dict[str, Any], *, by: Actor
) -> Tenant:
    """The tenant's own settings changed (a null: back to Herald's default)."""
    was = _settings(await own(session, tenant_id), values)
    tenant = await tenants.set_values(session, tenant_id, values)
    assert tenant is not None
    now = _settings(tenant, values)
    await audit.record(session, tenant_id, by, "tenant.updated", tenant_id, before=was, after=now)
    return tenant


def _settings(tenant: Tenant, names: dict[str, Any]) -> dict[str, Any]:
    return {name: getattr(tenant, name) for name in names}
