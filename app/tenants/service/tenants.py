"""Tenants as other domains see them (the console's tenant picker), and a tenant's own settings."""

from __future__ import annotations

from dataclasses import dataclass
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
    bounds: RetentionBounds,
    by: Actor,
) -> Tenant:
    """The tenant's own settings changed (a null: back to Herald's default). Its retentions
    are held within the operator's ``bounds``."""
    current = await own(session, tenant_id)
    _check_retention(current, values, bounds)
    was = _settings(current, values)
    tenant = await tenants.set_values(session, tenant_id, values)
    assert tenant is not None
    now = _settings(tenant, values)
    await audit.record(session, tenant_id, by, "tenant.updated", tenant_id, before=was, after=now)
    return tenant


@dataclass(frozen=True)
class RetentionBounds:
    """What the operator's settings allow a tenant's retention."""

    most_days: float  # HERALD_RETENTION_DAYS: nothing is kept longer
    key_hours: float  # HERALD_IDEMPOTENCY_KEY_TTL_HOURS: a retried request finds what it made


def _check_retention(tenant: Tenant, values: dict[str, Any], bounds: RetentionBounds) -> None:
    """Neither retention past the operator's, records not past the idempotency window, and the
    payload's not past the records'."""
    for name in ("retention_days", "payload_retention_days"):
        if (days := values.get(name)) is not None and days > bounds.most_days:
            raise Unprocessable(
                f"{name} is {days}, longer than this Herald keeps anything: "
                f"{bounds.most_days:g} days (its operator's HERALD_RETENTION_DAYS)"
            )
    records = values.get("retention_days", tenant.retention_days)
    if "retention_days" in values and records is not None and records * 24 <= bounds.key_hours:
        raise Unprocessable(
            f"retention_days is {records}: it must outlast the idempotency window "
            f"({bounds.key_hours:g} hours), so that a request sent again finds what it made"
        )
    payloads = values.get("payload_retention_days", tenant.payload_retention_days)
    if payloads is not None and records is not None and payloads > records:
        raise Unprocessable(
            f"payload_retention_days is {payloads}, longer than retention_days ({records}): "
            "a payload is never kept past the records of its deliveries"
        )


def _settings(tenant: Tenant, names: dict[str, Any]) -> dict[str, Any]:
    return {name: getattr(tenant, name) for name in names}
