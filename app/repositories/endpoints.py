from __future__ import annotations

from typing import Any

from sqlalchemy import func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.ids import is_id
from app.models import Endpoint

_live = Endpoint.deleted_at.is_(None)


async def insert_endpoint(session: AsyncSession, **values: Any) -> Endpoint:
    return (
        await session.execute(insert(Endpoint).values(**values).returning(Endpoint))
    ).scalar_one()


async def get_live(session: AsyncSession, tenant_id: str, endpoint_id: str) -> Endpoint | None:
    """The tenant's endpoint, unless deleted. Another tenant's id finds nothing."""
    if not is_id(endpoint_id):
        return None
    return (
        await session.execute(
            select(Endpoint).where(
                Endpoint.id == endpoint_id, Endpoint.tenant_id == tenant_id, _live
            )
        )
    ).scalar_one_or_none()


async def list_page(
    session: AsyncSession, tenant_id: str, *, limit: int, before_id: str | None
) -> list[Endpoint]:
    query = select(Endpoint).where(Endpoint.tenant_id == tenant_id, _live)
    if before_id is not None:
        query = query.where(Endpoint.id < before_id)
    return list((await session.execute(query.order_by(Endpoint.id.desc()).limit(limit))).scalars())


async def update_fields(
    session: AsyncSession, tenant_id: str, endpoint_id: str, values: dict[str, Any]
) -> Endpoint | None:
    if not is_id(endpoint_id):
        return None
    return (
        await session.execute(
            update(Endpoint)
            .where(Endpoint.id == endpoint_id, Endpoint.tenant_id == tenant_id, _live)
            .values(**values, updated_at=func.now())
            .returning(Endpoint)
        )
    ).scalar_one_or_none()


async def soft_delete(session: AsyncSession, tenant_id: str, endpoint_id: str) -> bool:
    if not is_id(endpoint_id):
        return False
    result = await session.execute(
        update(Endpoint)
        .where(Endpoint.id == endpoint_id, Endpoint.tenant_id == tenant_id, _live)
        .values(
            deleted_at=func.now(), enabled=False, disabled_reason="deleted", updated_at=func.now()
        )
        .returning(Endpoint.id)
    )
    return result.scalar_one_or_none() is not None


async def subscribed_to(session: AsyncSession, tenant_id: str, event_type: str) -> list[str]:
    """Ids of the tenant's enabled endpoints that receive ``event_type``."""
    query = (
        select(Endpoint.id)
        .where(
            Endpoint.tenant_id == tenant_id,
            _live,
            Endpoint.enabled.is_(True),
            or_(Endpoint.event_types.is_(None), Endpoint.event_types.any_() == event_type),
        )
        .order_by(Endpoint.id)
    )
    return list((await session.execute(query)).scalars())


async def disable(session: AsyncSession, endpoint_id: str, reason: str) -> None:
    """Workers disable an endpoint that told them to go away (410 Gone)."""
    await session.execute(
        update(Endpoint)
        .where(Endpoint.id == endpoint_id, Endpoint.enabled.is_(True))
        .values(enabled=False, disabled_reason=reason, updated_at=func.now())
    )
