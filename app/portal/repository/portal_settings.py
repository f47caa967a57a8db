"""``portal_settings``: one row per tenant that has set any; none means the defaults."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import PortalSettings


async def put(session: AsyncSession, tenant_id: str, values: dict[str, Any]) -> PortalSettings:
    statement = insert(PortalSettings).values(tenant_id=tenant_id, **values)
    return (
        await session.execute(
            statement.on_conflict_do_update(
                index_elements=[PortalSettings.tenant_id],
                set_={**values, "updated_at": func.now()},
            )
            .returning(PortalSettings)
            .execution_options(populate_existing=True)
        )
    ).scalar_one()


async def get(
    session: AsyncSession, tenant_id: str, *, for_update: bool = False
) -> PortalSettings | None:
    query = select(PortalSettings).where(PortalSettings.tenant_id == tenant_id)
    if for_update:
        query = query.with_for_update()
    return (await session.execute(query)).scalar_one_or_none()
