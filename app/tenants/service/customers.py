"""A tenant's customers: the level under a tenant that owns endpoints and receives events
(app/core/scope.py says how a customer's scope narrows every query)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.service import audit
from app.core.actors import Actor
from app.core.errors import NotFound
from app.models import Customer
from app.tenants.repository import customers

list_customers = customers.list_page


async def put_customer(
    session: AsyncSession, tenant_id: str, customer_id: str, name: str | None, *, by: Actor
) -> tuple[Customer, bool]:
    """Create the customer or name it afresh (customers.put); and whether it was made."""
    earlier = await customers.get_live(session, tenant_id, customer_id)
    was = None if earlier is None else {"name": earlier.name}  # before the put refreshes it
    customer, made = await customers.put(session, tenant_id, customer_id, name)
    action = "customer.created" if made else "customer.updated"
    await audit.record(
        session,
        tenant_id,
        by,
        action,
        customer_id,
        before=None if made else was,
        after={"name": name},
    )
    return customer, made


async def get_customer(
    session: AsyncSession, tenant_id: str, customer_id: str, *, lock: bool = False
) -> Customer:
    """The tenant's live customer, or 404 -- another tenant's customer is not found alike.
    ``lock``: its deletion waits until the transaction ends (an endpoint made for it)."""
    customer = await customers.get_live(session, tenant_id, customer_id, lock=lock)
    if customer is None:
        raise NotFound(f"customer {customer_id} not found")
    return customer


async def mark_deleted(
    session: AsyncSession, tenant_id: str, customer_id: str, *, by: Actor
) -> None:
    if not await customers.mark_deleted(session, tenant_id, customer_id):
        raise NotFound(f"customer {customer_id} not found")
    await audit.record(session, tenant_id, by, "customer.deleted", customer_id)
