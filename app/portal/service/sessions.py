"""Portal sessions: minted by the tenant's backend for one customer, opened once by the link
it answers, then carried by the portal page as a bearer token (docs/decisions.md, on the
portal's session). Tokens are random and kept only as SHA-256."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import NotFound, Unauthorized
from app.models import PortalSession
from app.portal.repository import portal_sessions
from app.portal.repository.portal_sessions import Listed as Listed
from app.portal.repository.portal_sessions import tenant_of as tenant_of
from app.portal.schemas import LINK_SECONDS, PortalSessionCreate, SessionStatus
from app.tenants.service import customers
from app.tenants.service.customer_sessions import LINK_PREFIX, SESSION_PREFIX, digest
from app.tenants.service.customer_sessions import Visitor as Visitor
from app.tenants.service.customer_sessions import visitor_for as visitor_for


@dataclass(frozen=True)
class Minted:
    session: PortalSession
    link_token: str  # goes in the URL's fragment; shown once


async def mint(
    session: AsyncSession, tenant_id: str, spec: PortalSessionCreate, api_key_id: str | None
) -> Minted:
    """``api_key_id``: the key minting it, whose revocation ends it."""
    await customers.get_customer(session, tenant_id, spec.customer_id)
    link_token = LINK_PREFIX + secrets.token_urlsafe(32)
    row = await portal_sessions.insert_session(
        session,
        tenant_id=tenant_id,
        customer_id=spec.customer_id,
        capabilities=sorted(set(spec.capabilities)),
        link_hash=digest(link_token),
        link_lasts=timedelta(seconds=LINK_SECONDS),
        lasts=timedelta(seconds=spec.lifetime_seconds),
        api_key_id=api_key_id,
    )
    return Minted(row, link_token)


@dataclass(frozen=True)
class Opened:
    session_token: str  # kept in the page's memory, sent as Authorization: Bearer
    session: PortalSession


async def open_link(session: AsyncSession, link_token: str) -> Opened:
    """The link used, once: a session token for it. A used, expired, revoked or unknown link
    is refused saying which, so the customer knows to ask for a new one."""
    session_token = SESSION_PREFIX + secrets.token_urlsafe(32)
    link_hash = digest(link_token)
    row = await portal_sessions.exchange(
        session, link_hash=link_hash, session_hash=digest(session_token)
    )
    if row is not None:
        return Opened(session_token, row)
    raise Unauthorized(_why_not(await portal_sessions.by_link(session, link_hash)))


_AGAIN = "open the portal again from the page that showed it"


def _why_not(row: PortalSession | None) -> str:
    if row is None:
        return f"this portal link is not valid: {_AGAIN}"
    if row.revoked_at is not None:
        return f"this portal link was revoked: {_AGAIN}"
    if row.exchanged_at is not None:
        return f"this portal link was already used (each works once): {_AGAIN}"
    if row.link_expires_at > datetime.now(UTC):
        return f"the customer this portal link was for was deleted: {_AGAIN}"
    expired = row.link_expires_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"this portal link expired at {expired}: {_AGAIN}"


async def revoke(session: AsyncSession, tenant_id: str, session_id: str) -> None:
    if not await portal_sessions.revoke(session, tenant_id, session_id):
        raise NotFound(f"portal session {session_id} not found")


def status_of(listed: Listed, now: datetime) -> SessionStatus:
    row = listed.row
    if row.revoked_at is not None or listed.key_revoked:
        return "revoked"
    if row.expires_at <= now or (row.exchanged_at is None and row.link_expires_at <= now):
        return "ended"
    return "open" if row.exchanged_at is not None else "unopened"


async def list_sessions(
    session: AsyncSession,
    tenant_id: str,
    *,
    customer_id: str | None,
    api_key_id: str | None,
    limit: int,
    before_id: str | None,
) -> list[Listed]:
    return await portal_sessions.list_page(
        session,
        tenant_id,
        customer_id=customer_id,
        api_key_id=api_key_id,
        limit=limit,
        before_id=before_id,
    )


async def revoke_matching(
    session: AsyncSession, tenant_id: str, *, customer_id: str | None, api_key_id: str | None
) -> int:
    """Every running session of the customer, or minted by the key (or both): ended now."""
    return await portal_sessions.revoke_matching(
        session, tenant_id, customer_id=customer_id, api_key_id=api_key_id
    )
