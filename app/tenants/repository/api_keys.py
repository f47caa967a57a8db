from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.actors import Actor
from app.core.ids import is_id, new_id
from app.models import ApiKey


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: a tenant, an admin, or an admin bound to a tenant."""

    tenant_id: str | None
    is_admin: bool
    key_id: str | None = None  # None for the configured admin key (HERALD_ADMIN_API_KEY)
    # A key for one polling endpoint: it polls that endpoint and acknowledges, nothing else.
    endpoint_id: str | None = None

    @property
    def actor(self) -> Actor:
        """Who the audit trail names for what this key changes."""
        return Actor("admin" if self.is_admin else "api_key", self.key_id)


async def insert_key(
    session: AsyncSession,
    *,
    tenant_id: str | None,
    is_admin: bool,
    key_hash: bytes,
    prefix: str,
    label: str | None,
    endpoint_id: str | None = None,
) -> ApiKey:
    statement = (
        insert(ApiKey)
        .values(
            id=new_id("key"),
            tenant_id=tenant_id,
            is_admin=is_admin,
            key_hash=key_hash,
            display_prefix=prefix,
            label=label,
            endpoint_id=endpoint_id,
        )
        .returning(ApiKey)
    )
    return (await session.execute(statement)).scalar_one()


# The key's principal, and its last use marked -- at most once a minute, so that a busy key
# is not a row every request writes.
_FIND_AND_MARK_USED = text("""
WITH found AS (
    SELECT id, tenant_id, is_admin, endpoint_id, last_used_at FROM api_keys
     WHERE key_hash = :key_hash AND revoked_at IS NULL
), marked AS (
    UPDATE api_keys SET last_used_at = now() FROM found
     WHERE api_keys.id = found.id
       AND (found.last_used_at IS NULL OR found.last_used_at < now() - interval '1 minute')
)
SELECT id, tenant_id, is_admin, endpoint_id FROM found
""")


async def find_principal(session: AsyncSession, key_hash: bytes) -> Principal | None:
    """Who an unrevoked key is, its use recorded; None for an unknown or revoked key."""
    row = (await session.execute(_FIND_AND_MARK_USED, {"key_hash": key_hash})).one_or_none()
    if row is None:
        return None
    return Principal(
        tenant_id=row.tenant_id, is_admin=row.is_admin, key_id=row.id, endpoint_id=row.endpoint_id
    )


async def list_page(
    session: AsyncSession,
    *,
    tenant_id: str | None,
    every_tenant: bool,
    limit: int,
    before_id: str | None,
    with_admin_keys: bool = True,
) -> list[ApiKey]:
    """Newest first: one tenant's keys, the admin keys (``tenant_id`` None), or every key;
    without the admin keys bound to a tenant unless ``with_admin_keys``."""
    query = select(ApiKey)
    if not with_admin_keys:
        query = query.where(ApiKey.is_admin.is_(False))
    if not every_tenant:
        query = query.where(
            ApiKey.tenant_id.is_(None) if tenant_id is None else ApiKey.tenant_id == tenant_id
        )
    if before_id is not None:
        query = query.where(ApiKey.id < before_id)
    return list((await session.execute(query.order_by(ApiKey.id.desc()).limit(limit))).scalars())


async def revoke(session: AsyncSession, key_id: str, *, tenant_id: str | None) -> ApiKey | None:
    """Revoke a key (a tenant key of ``tenant_id``, unless None: any key); revoking twice keeps
    the first time. None when there is no such key (for that tenant)."""
    if not is_id(key_id):
        return None
    statement = update(ApiKey).where(ApiKey.id == key_id)
    if tenant_id is not None:
        # A tenant's own keys only: not an operator's admin key bound to the tenant.
        statement = statement.where(ApiKey.tenant_id == tenant_id, ApiKey.is_admin.is_(False))
    result = await session.execute(
        statement.values(revoked_at=func.coalesce(ApiKey.revoked_at, func.now()))
        .returning(ApiKey)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    return result.scalar_one_or_none()


async def endpoint_delivery(session: AsyncSession, tenant_id: str, endpoint_id: str) -> str | None:
    """How the tenant's live endpoint is delivered to (push or poll); None: no such endpoint.
    Read here rather than through the endpoints domain, which sits above tenants."""
    if not is_id(endpoint_id):
        return None
    found = await session.execute(
        text(
            "SELECT delivery FROM endpoints"
            " WHERE id = :id AND tenant_id = :tenant_id AND deleted_at IS NULL"
        ),
        {"id": endpoint_id, "tenant_id": tenant_id},
    )
    delivery: str | None = found.scalar_one_or_none()
    return delivery
