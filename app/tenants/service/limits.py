"""What one tenant may use of a shared Herald: the operator's limits for it, or the defaults
every tenant gets (HERALD_TENANT_*). Each limit is enforced where the thing it counts is made:
endpoints when one is created (endpoints service, under the tenant's lock), an event's
deliveries when it fans out (the subscribers' query stops one past the limit)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.service import audit
from app.core.actors import Actor
from app.core.config import Settings
from app.core.errors import NotFound
from app.models import Tenant
from app.tenants.repository import tenants


@dataclass(frozen=True)
class Limits:
    max_endpoints: int
    max_endpoints_per_customer: int  # the tenant's own endpoints (of no customer) count as one
    max_fanout: int  # deliveries one event may make
    accept_rate: float  # intents accepted a second, across every API process; 0: no limit
    delivery_rate: float  # attempts started a second, across every worker; 0: no limit

    @classmethod
    def defaults(cls, settings: Settings) -> Limits:
        return cls(
            max_endpoints=settings.tenant_max_endpoints,
            max_endpoints_per_customer=settings.tenant_max_endpoints_per_customer,
            max_fanout=settings.tenant_max_fanout,
            accept_rate=settings.tenant_accept_rate,
            delivery_rate=settings.tenant_delivery_rate,
        )

    def of(self, tenant: Tenant) -> Limits:
        """The tenant's: the operator's where set, these defaults elsewhere."""
        chosen = {f.name: getattr(tenant, f.name) for f in fields(self)}
        return Limits(**{n: getattr(self, n) if v is None else v for n, v in chosen.items()})


NAMES = tuple(f.name for f in fields(Limits))


def set_by_operator(tenant: Tenant) -> list[str]:
    return [name for name in NAMES if getattr(tenant, name) is not None]


async def tenant_of(session: AsyncSession, tenant_id: str) -> Tenant:
    tenant = await tenants.get(session, tenant_id)
    if tenant is None:
        raise NotFound(f"tenant {tenant_id} not found")
    return tenant


async def lock(session: AsyncSession, tenant_id: str) -> Tenant:
    """The tenant's row, locked until the transaction ends: a count checked against its limits
    stays true until what it counts is made."""
    tenant = await tenants.locked(session, tenant_id)
    if tenant is None:
        raise NotFound(f"tenant {tenant_id} not found")
    return tenant


async def hold(session: AsyncSession, tenant_id: str, defaults: Limits) -> Limits:
    """The tenant's limits, its row locked (``lock``)."""
    return defaults.of(await lock(session, tenant_id))


async def set_limits(
    session: AsyncSession, tenant_id: str, values: dict[str, int | None], *, by: Actor
) -> Tenant:
    """The operator's change to what a tenant may use, in the tenant's audit trail."""
    earlier = await tenants.get(session, tenant_id)
    if earlier is None:
        raise NotFound(f"tenant {tenant_id} not found")
    was = {name: getattr(earlier, name) for name in values}
    tenant = await tenants.set_values(session, tenant_id, values)
    assert tenant is not None
    now = {name: getattr(tenant, name) for name in values}
    await audit.record(session, tenant_id, by, "limits.updated", tenant_id, before=was, after=now)
    return tenant
