from __future__ import annotations

from sqlalchemy import insert, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.ids import new_id
from app.models import Tenant


async def insert_tenant(session: AsyncSession, name: str) -> Tenant | None:
    """Create a tenant; None when the name is taken."""
    row = (
        await session.execute(
            pg_insert(Tenant)
            .values(id=new_id("ten"), name=name)
            .on_conflict_do_nothing(index_elements=[Tenant.name])
            .returning(Tenant)
        )
    ).scalar_one_or_none()
    return row


async def get_or_create(session: AsyncSession, name: str) -> Tenant:
    tenant = (await session.execute(select(Tenant).where(Tenant.name == name))).scalar_one_or_none()
    if tenant is not None:
        return tenant
    return (
        await session.execute(insert(Tenant).values(id=new_id("ten"), name=name).returning(Tenant))
    ).scalar_one()
