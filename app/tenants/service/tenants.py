"""Tenants as other domains see them (the console's tenant picker), and a tenant's own settings."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.service import audit
from app.core.actors import Actor
from app.core.errors import Unprocessable
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
    session: AsyncSession,
    tenant_id: str,
    values: dict[str, Any],
    *,
    most_days: float,
    by: Actor,
) -> Tenant:
    """The tenant's own settings changed (a null: back to Herald's default). Its retentions
    are held within ``most_days``, the operator's."""
    current = await own(session, tenant_id)
    _check_retention(current, values, most_days)
    was = _settings(current, values)
    tenant = await tenants.set_values(session, tenant_id, values)
    assert tenant is not None
    now = _settings(tenant, values)
    await audit.record(session, tenant_id, by, "tenant.updated", tenant_id, before=was, after=now)
    return tenant


def _check_retention(tenant: Tenant, values: dict[str, Any], most_days: float) -> None:
    """Neither retention past the operator's, nor the payload's past the records'."""
    for name in ("retention_days", "payload_retention_days"):
        if (days := values.get(name)) is not None and days > most_days:
            raise Unprocessable(
                f"{name} is {days}, longer than this Herald keeps anything: at most "
                f"{int(most_days)} days (its operator's HERALD_RETENTION_DAYS)"
            )
    records = values.get("retention_days", tenant.retention_days)
    payloads = values.get("payload_retention_days", tenant.payload_retention_days)
    if payloads is not None and records is not None and payloads > records:
        raise Unprocessable(
            f"payload_retention_days is {payloads}, longer than retention_days ({records}): "
            "a payload is never kept past the records of its deliveries"
        )


def _settings(tenant: Tenant, names: dict[str, Any]) -> dict[str, Any]:
    return {name: getattr(tenant, name) for name in names}
