from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.ids import new_id
from app.models import ApiKey


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: a tenant, an admin, or an admin bound to a tenant."""

    tenant_id: str | None
    is_admin: bool


async def insert_key(
    session: AsyncSession, *, tenant_id: str | None, is_admin: bool, key_hash: bytes, prefix: str
) -> str:
    key_id = new_id("key")
    await session.execute(
        insert(ApiKey).values(
            id=key_id,
            tenant_id=tenant_id,
            is_admin=is_admin,
            key_hash=key_hash,
            display_prefix=prefix,
        )
    )
    return key_id


async def find_principal(session: AsyncSession, key_hash: bytes) -> Principal | None:
    row = (
        await session.execute(
            select(ApiKey.tenant_id, ApiKey.is_admin).where(
                ApiKey.key_hash == key_hash, ApiKey.revoked_at.is_(None)
            )
        )
    ).one_or_none()
    return None if row is None else Principal(tenant_id=row.tenant_id, is_admin=row.is_admin)
