"""What a tenant may use: its own limits (``herald.limits``), and every tenant's for an admin
key (``herald.tenants``), sync and async."""

from __future__ import annotations

from typing import TYPE_CHECKING

from herald_client import _calls
from herald_client.models import Limits

if TYPE_CHECKING:
    from herald_client.client import AsyncHerald, Herald


class OwnLimits:
    def __init__(self, client: Herald) -> None:
        self._run = client.run

    def get(self) -> Limits:
        """This tenant's limits: endpoints, fan-out, accept and delivery rates."""
        return self._run(_calls.own_limits())


class AsyncOwnLimits:
    def __init__(self, client: AsyncHerald) -> None:
        self._run = client.run

    async def get(self) -> Limits:
        return await self._run(_calls.own_limits())


class Tenants:
    """Admin keys only."""

    def __init__(self, client: Herald) -> None:
        self._run = client.run

    def limits(self, tenant_id: str) -> Limits:
        return self._run(_calls.tenant_limits(tenant_id))

    def update_limits(self, tenant_id: str, **changes: float | None) -> Limits:
        """Set the tenant's max_endpoints, max_endpoints_per_customer, max_fanout,
        accept_rate, delivery_rate (rates: 0 is no limit); None returns one to the default
        every tenant gets. Those not named stay as they are."""
        return self._run(_calls.update_limits(tenant_id, changes))


class AsyncTenants:
    """Admin keys only."""

    def __init__(self, client: AsyncHerald) -> None:
        self._run = client.run

    async def limits(self, tenant_id: str) -> Limits:
        return await self._run(_calls.tenant_limits(tenant_id))

    async def update_limits(self, tenant_id: str, **changes: float | None) -> Limits:
        return await self._run(_calls.update_limits(tenant_id, changes))
