"""The versions of an endpoint's transformation: written, never changed; read as a delivery
is sent (the claim reads them itself: app/engine/repository/delivery_leases.py) or shown."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.ids import id_floor, new_id
from app.models import Transformation


async def add_version(
    session: AsyncSession, tenant_id: str, endpoint_id: str, source: str | None
) -> None:
    """The endpoint's transformation from now on (None: none), for deliveries accepted from
    now: those accepted before keep theirs."""
    await session.execute(
        insert(Transformation).values(
            id=new_id("trf"),
            tenant_id=tenant_id,
            endpoint_id=endpoint_id,
            since=id_floor("dlv", datetime.now(UTC)),
            source=source,
        )
    )


async def transformation_sent_as(
    session: AsyncSession, endpoint_id: str, delivery_id: str
) -> str | None:
    """The transformation a delivery of this endpoint is sent as (None: none)."""
    source: str | None = await session.scalar(
        select(Transformation.source)
        .where(Transformation.endpoint_id == endpoint_id, Transformation.since <= delivery_id)
        .order_by(Transformation.since.desc(), Transformation.id.desc())
        .limit(1)
    )
    return source
