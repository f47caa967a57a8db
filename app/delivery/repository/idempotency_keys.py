from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.fields import is_idempotency_key
from app.models import IdempotencyKey


@dataclass(frozen=True)
class StoredKey:
    request_hash: bytes
    resource_id: str
    response_status: int


async def claim(
    session: AsyncSession,
    *,
    tenant_id: str,
    key: str,
    request_hash: bytes,
    resource_id: str,
    response_status: int,
    ttl: timedelta,
) -> StoredKey | None:
    """Claim ``key`` for a new resource in the caller's transaction; None if we now own it.

    Otherwise the live claim that already holds it is returned. A concurrent request with the
    same key blocks on the primary key until the first transaction ends, then sees its committed
    claim, so one key never creates two resources. An expired claim is taken over.
    """
    statement = pg_insert(IdempotencyKey).values(
        tenant_id=tenant_id,
        key=key,
        request_hash=request_hash,
        resource_id=resource_id,
        response_status=response_status,
        expires_at=func.now() + ttl,
    )
    statement = statement.on_conflict_do_update(
        index_elements=[IdempotencyKey.tenant_id, IdempotencyKey.key],
        set_={
            "request_hash": statement.excluded.request_hash,
            "resource_id": statement.excluded.resource_id,
            "response_status": statement.excluded.response_status,
            "created_at": func.now(),
            "expires_at": statement.excluded.expires_at,
        },
        where=IdempotencyKey.expires_at <= func.now(),
    )
    claimed = (await session.execute(statement.returning(IdempotencyKey.key))).first()
    if claimed is not None:
        return None
    row = (
        await session.execute(
            select(
                IdempotencyKey.request_hash,
                IdempotencyKey.resource_id,
                IdempotencyKey.response_status,
            ).where(IdempotencyKey.tenant_id == tenant_id, IdempotencyKey.key == key)
        )
    ).one()
    return StoredKey(row.request_hash, row.resource_id, row.response_status)


@dataclass(frozen=True)
class KeyClaim:
    key: str
    request_hash: bytes
    resource_id: str


async def claim_many(
    session: AsyncSession, *, tenant_id: str, claims: list[KeyClaim], ttl: timedelta
) -> dict[str, StoredKey]:
    """``claim`` for many distinct keys in two statements; returns the live earlier claims of
    the keys this call did not get (the rest are now ours).

    Keys are claimed in sorted order. Each claim locks its key until the transaction ends, in
    the order the rows are listed: two batches sharing keys in opposite orders would each hold
    one the other waits for, a deadlock. In one order, the later batch just waits its turn.
    """
    if not claims:
        return {}
    statement = pg_insert(IdempotencyKey).values(
        [
            {
                "tenant_id": tenant_id,
                "key": c.key,
                "request_hash": c.request_hash,
                "resource_id": c.resource_id,
                "response_status": 202,
                "expires_at": func.now() + ttl,
            }
            for c in sorted(claims, key=lambda claim: claim.key)
        ]
    )
    statement = statement.on_conflict_do_update(
        index_elements=[IdempotencyKey.tenant_id, IdempotencyKey.key],
        set_={
            "request_hash": statement.excluded.request_hash,
            "resource_id": statement.excluded.resource_id,
            "created_at": func.now(),
            "expires_at": statement.excluded.expires_at,
        },
        where=IdempotencyKey.expires_at <= func.now(),
    )
    ours = set((await session.execute(statement.returning(IdempotencyKey.key))).scalars())
    held = [c.key for c in claims if c.key not in ours]
    if not held:
        return {}
    rows = await session.execute(
        select(
            IdempotencyKey.key,
            IdempotencyKey.request_hash,
            IdempotencyKey.resource_id,
            IdempotencyKey.response_status,
        ).where(IdempotencyKey.tenant_id == tenant_id, IdempotencyKey.key.in_(held))
    )
    return {
        row.key: StoredKey(row.request_hash, row.resource_id, row.response_status) for row in rows
    }


async def release_many(session: AsyncSession, *, tenant_id: str, keys: list[str]) -> None:
    """Give back keys claimed earlier in this transaction for requests that then failed."""
    if keys:
        await session.execute(
            delete(IdempotencyKey).where(
                IdempotencyKey.tenant_id == tenant_id, IdempotencyKey.key.in_(keys)
            )
        )


async def resource_of(session: AsyncSession, tenant_id: str, key: str) -> str | None:
    """What an unexpired key of the tenant's answered with (an event's or a delivery's id);
    None for text no key could be (a NUL byte would be an error in SQL, not "not found")."""
    if not is_idempotency_key(key):
        return None
    query = select(IdempotencyKey.resource_id).where(
        IdempotencyKey.tenant_id == tenant_id,
        IdempotencyKey.key == key,
        IdempotencyKey.expires_at > func.now(),
    )
    return (await session.execute(query)).scalar_one_or_none()
