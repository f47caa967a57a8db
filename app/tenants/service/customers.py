"""A tenant's customers: the level under a tenant that owns endpoints and receives events
(app/core/scope.py says how a customer's scope narrows every query)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import NotFound
from app.models import Customer
from app.tenants.repository import customers

put_customer = customers.put
list_customers = customers.list_page


async def get_customer(
    session: AsyncSession, tenant_id: str, customer_id: str, *, lock: bool = False
) -> Customer:
    """The tenant's live customer, or 404 -- another tenant's customer is not found alike.
    ``lock``: its deletion waits until the transaction ends (an endpoint made for it)."""
    customer = await customers.get_live(session, tenant_id, customer_id, lock=lock)
    if customer is None:
        raise NotFound(f"customer {customer_id} not found")
    return customer


async def mark_deleted(session: AsyncSession, tenant_id: str, customer_id: str) -> None:
    if not await customers.mark_deleted(session, tenant_id, customer_id):
        raise NotFound(f"customer {customer_id} not found")
