"""``portal_sessions``: minted by a tenant, its link used once, then found by its session
token on every portal request while it lasts, its customer stands and nobody revoked it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.ids import is_id, new_id
from app.models import ApiKey, Customer, PortalSession


async def insert_session(
    session: AsyncSession,
    *,
    tenant_id: str,
    customer_id: str,
    capabilities: list[str],
    link_hash: bytes,
    link_lasts: timedelta,
    lasts: timedelta,
    api_key_id: str | None,
) -> PortalSession:
    return (
        await session.execute(
            insert(PortalSession)
            .values(
                id=new_id("pts"),
                tenant_id=tenant_id,
                customer_id=customer_id,
                capabilities=capabilities,
                link_hash=link_hash,
                link_expires_at=func.now() + min(link_lasts, lasts),
                expires_at=func.now() + lasts,
                api_key_id=api_key_id,
            )
            .returning(PortalSession)
        )
    ).scalar_one()


# The key that minted the session is not revoked (a session ends with its key).
_key_stands = ~(
    select(ApiKey.id)
    .where(ApiKey.id == PortalSession.api_key_id, ApiKey.revoked_at.is_not(None))
    .exists()
)

# The session's customer still stands, in the life it was minted in (see ``find``).
_customer_stands = (
    select(Customer.id)
    .where(
        Customer.tenant_id == PortalSession.tenant_id,
        Customer.id == PortalSession.customer_id,
        Customer.deleted_at.is_(None),
        Customer.created_at <= PortalSession.created_at,
    )
    .exists()
)


async def exchange(
    session: AsyncSession, *, link_hash: bytes, session_hash: bytes
) -> PortalSession | None:
    """The link used: one statement sets ``exchanged_at`` only if it is unset and the link
    has not expired, so of two uses exactly one finds the row."""
    return (
        await session.execute(
            update(PortalSession)
            .where(
                PortalSession.link_hash == link_hash,
                PortalSession.exchanged_at.is_(None),
                PortalSession.revoked_at.is_(None),
                PortalSession.link_expires_at > func.now(),
                _customer_stands,
                _key_stands,
            )
            .values(exchanged_at=func.now(), session_hash=session_hash)
            .returning(PortalSession)
        )
    ).scalar_one_or_none()


async def by_link(session: AsyncSession, link_hash: bytes) -> PortalSession | None:
    """The session a link was for, however it stands (to say why it cannot be used)."""
    return (
        await session.execute(select(PortalSession).where(PortalSession.link_hash == link_hash))
    ).scalar_one_or_none()


async def tenant_of(session: AsyncSession, session_id: str) -> str | None:
    """The tenant a session was minted by, however it stands: whose portal its page is."""
    if not is_id(session_id):
        return None
    found = select(PortalSession.tenant_id).where(PortalSession.id == session_id)
    return (await session.execute(found)).scalar_one_or_none()


async def revoke(session: AsyncSession, tenant_id: str, session_id: str) -> bool:
    if not is_id(session_id):
        return False
    result = await session.execute(
        update(PortalSession)
        .where(
            PortalSession.id == session_id,
            PortalSession.tenant_id == tenant_id,
            PortalSession.revoked_at.is_(None),
        )
        .values(revoked_at=func.now())
        .returning(PortalSession.id)
    )
    return result.scalar_one_or_none() is not None


@dataclass(frozen=True)
class Listed:
    row: PortalSession
    key_revoked: bool  # the key that minted it was revoked: it has ended


def _matching(tenant_id: str, customer_id: str | None, api_key_id: str | None) -> list[Any]:
    where: list[Any] = [PortalSession.tenant_id == tenant_id]
    if customer_id is not None:
        where.append(PortalSession.customer_id == customer_id)
    if api_key_id is not None:
        where.append(PortalSession.api_key_id == api_key_id)
    return where


async def list_page(
    session: AsyncSession,
    tenant_id: str,
    *,
    customer_id: str | None,
    api_key_id: str | None,
    limit: int,
    before_id: str | None,
) -> list[Listed]:
    """The tenant's sessions, newest first, with whether their key was revoked."""
    query = (
        select(PortalSession, ApiKey.revoked_at.is_not(None))
        .outerjoin(ApiKey, ApiKey.id == PortalSession.api_key_id)
        .where(*_matching(tenant_id, customer_id, api_key_id))
    )
    if before_id is not None:
        query = query.where(PortalSession.id < before_id)
    rows = await session.execute(query.order_by(PortalSession.id.desc()).limit(limit))
    return [Listed(row, bool(key_revoked)) for row, key_revoked in rows]


async def revoke_matching(
    session: AsyncSession, tenant_id: str, *, customer_id: str | None, api_key_id: str | None
) -> int:
    """Every session of the tenant's still running that matches: revoked now. How many."""
    result = await session.execute(
        update(PortalSession)
        .where(
            *_matching(tenant_id, customer_id, api_key_id),
            PortalSession.revoked_at.is_(None),
            PortalSession.expires_at > func.now(),
        )
        .values(revoked_at=func.now())
        .returning(PortalSession.id)
    )
    return len(result.all())
