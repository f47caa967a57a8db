"""Signing in to the console: an API key exchanged for a server-side session.

The browser gets a random token (in an HttpOnly cookie); the database keeps its SHA-256 and
the SHA-256 of the key it came from, so a revoked key ends its sessions at the next page. The
key itself is checked once, here, and never stored, shown or logged."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.console.repository import console_sessions
from app.core.actors import Actor
from app.core.config import Settings
from app.core.errors import Forbidden, NotFound
from app.tenants.service.api_keys import PrincipalCache, hash_key, principal_for
from app.tenants.service.tenants import get_tenant


@dataclass(frozen=True)
class Viewer:
    """Who is looking: a tenant's key sees its tenant; an admin key sees every tenant."""

    session_id: str
    tenant_id: str | None  # an admin bound to no tenant: None
    is_admin: bool
    csrf_token: str
    viewing: str | None  # the tenant whose data the pages show (None: an admin yet to pick)

    def chosen_tenant(self) -> str:
        """The tenant the pages show, for what acts on it: an admin picks one first."""
        if self.viewing is None:
            raise Forbidden("pick a tenant first")
        return self.viewing

    @property
    def actor(self) -> Actor:
        """Who the audit trail names for what this sign-in changes: its console session."""
        return Actor("console", self.session_id)


@dataclass(frozen=True)
class SignedIn:
    token: str  # for the cookie; only its hash is stored


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _bootstrap_hash(settings: Settings) -> bytes | None:
    key = settings.admin_api_key
    return None if key is None else hash_key(key.get_secret_value())


async def sign_in(
    sessionmaker: async_sessionmaker[AsyncSession],
    settings: Settings,
    principals: PrincipalCache,
    key: str,
) -> SignedIn | None:
    """A new session for ``key``; None when the key is unknown or revoked."""
    key = key.strip()
    bootstrap = settings.admin_api_key
    if bootstrap is not None and hmac.compare_digest(
        key.encode(), bootstrap.get_secret_value().encode()
    ):
        tenant_id, is_admin = None, True
    elif key:
        principal = await principal_for(sessionmaker, principals, key)
        # A key for one endpoint polls that endpoint, and signs in to nothing.
        if principal is None or principal.endpoint_id is not None:
            return None
        tenant_id, is_admin = principal.tenant_id, principal.is_admin
    else:
        return None
    token = secrets.token_urlsafe(32)
    async with sessionmaker() as session, session.begin():
        await console_sessions.purge_expired(session)
        await console_sessions.open_session(
            session,
            token_hash=_digest(token),
            key_hash=hash_key(key),
            tenant_id=tenant_id,
            is_admin=is_admin,
            csrf_token=secrets.token_urlsafe(32),
            lasts=timedelta(hours=settings.console_session_hours),
        )
    return SignedIn(token)


async def viewer_of(
    sessionmaker: async_sessionmaker[AsyncSession], settings: Settings, token: str | None
) -> Viewer | None:
    """The signed-in viewer a session cookie names; None when it names no live session."""
    if not token:
        return None
    async with sessionmaker() as session, session.begin():
        found = await console_sessions.find(
            session, token_hash=_digest(token), bootstrap_hash=_bootstrap_hash(settings)
        )
    if found is None:
        return None
    viewing = found.tenant_id or found.viewing_tenant_id
    return Viewer(found.id, found.tenant_id, found.is_admin, found.csrf_token, viewing)


async def view_tenant(
    sessionmaker: async_sessionmaker[AsyncSession], viewer: Viewer, tenant_id: str | None
) -> None:
    """An admin bound to no tenant picks whose data to look at (a tenant's key cannot)."""
    if viewer.tenant_id is not None:
        raise Forbidden("this key sees its own tenant only")
    async with sessionmaker() as session, session.begin():
        if tenant_id is not None and await get_tenant(session, tenant_id) is None:
            raise NotFound(f"tenant {tenant_id} not found")
        await console_sessions.view_tenant(
            session, session_id=viewer.session_id, tenant_id=tenant_id
        )


async def sign_out(sessionmaker: async_sessionmaker[AsyncSession], token: str) -> None:
    async with sessionmaker() as session, session.begin():
        await console_sessions.close(session, token_hash=_digest(token))


def csrf_ok(viewer: Viewer, sent: str | None) -> bool:
    return sent is not None and hmac.compare_digest(viewer.csrf_token.encode(), sent.encode())
