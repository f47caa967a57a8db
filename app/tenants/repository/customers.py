"""``customers``: a tenant's own customers, keyed by the tenant and the tenant's id for each."""

from __future__ import annotations

from sqlalchemy import case, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.fields import CUSTOMER_ID_RULE
from app.models import Customer

_live = Customer.deleted_at.is_(None)


async def put(
    session: AsyncSession, tenant_id: str, customer_id: str, name: str | None
) -> tuple[Customer, bool]:
    """Create the customer or name it afresh -- a deleted one comes back, with no endpoints;
    and whether it was made (or brought back) rather than renamed."""
    earlier = (
        await session.execute(
            select(Customer.deleted_at)
            .where(Customer.tenant_id == tenant_id, Customer.id == customer_id)
            .with_for_update()
        )
    ).one_or_none()
    statement = insert(Customer).values(tenant_id=tenant_id, id=customer_id, name=name)
    customer = (
        await session.execute(
            statement.on_conflict_do_update(
                index_elements=[Customer.tenant_id, Customer.id],
                set_={
                    "name": name,
                    "updated_at": func.now(),
                    "deleted_at": None,
                    # Brought back, it starts a new life: nothing made for its earlier one --
                    # a portal session above all -- counts for it (portal_sessions.find).
                    "created_at": case(
                        (Customer.deleted_at.is_not(None), func.now()), else_=Customer.created_at
                    ),
                },
            )
            .returning(Customer)
            .execution_options(populate_existing=True)
        )
    ).scalar_one()
    return customer, earlier is None or earlier.deleted_at is not None


async def get_live(
    session: AsyncSession, tenant_id: str, customer_id: str, *, lock: bool = False
) -> Customer | None:
    """The tenant's customer, unless deleted. ``lock``: held (FOR SHARE) until the transaction
    ends, so that its deletion waits for whatever is being made for it."""
    if not CUSTOMER_ID_RULE.matches(customer_id):
        return None
    query = select(Customer).where(
        Customer.tenant_id == tenant_id, Customer.id == customer_id, _live
    )
    if lock:
        query = query.with_for_update(read=True)
    return (await session.execute(query)).scalar_one_or_none()


async def list_page(
    session: AsyncSession, tenant_id: str, *, limit: int, after_id: str | None
) -> list[Customer]:
    """By id: the tenant chose them, so they carry no time order."""
    query = select(Customer).where(Customer.tenant_id == tenant_id, _live)
    if after_id is not None:
        query = query.where(Customer.id > after_id)
    return list((await session.execute(query.order_by(Customer.id).limit(limit))).scalars())


async def mark_deleted(session: AsyncSession, tenant_id: str, customer_id: str) -> bool:
    """The customer deleted (its row kept); waits for any endpoint being made for it."""
    if not CUSTOMER_ID_RULE.matches(customer_id):
        return False
    result = await session.execute(
        update(Customer)
        .where(Customer.tenant_id == tenant_id, Customer.id == customer_id, _live)
        .values(deleted_at=func.now(), updated_at=func.now())
        .returning(Customer.id)
    )
    return result.scalar_one_or_none() is not None
