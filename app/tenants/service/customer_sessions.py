"""A customer's session: who a portal session token acts for -- one customer of one tenant,
within the capabilities it was minted with. The portal page sends it with every request, and so
may a tenant's own UI on the customer-scoped /v1 routes; both find the caller here, so both
are held to one ``Scope`` (app/core/scope.py)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.actors import Actor
from app.core.errors import Forbidden, Unauthorized
from app.core.scope import Scope
from app.tenants.repository import customer_sessions

LINK_PREFIX, SESSION_PREFIX = "hpl_", "hps_"
CAPABILITIES = ("manage_endpoints", "replay", "transform_endpoints", "poll_endpoints")
_SAID = {
    "manage_endpoints": "manage endpoints",
    "replay": "replay deliveries",
    "transform_endpoints": "set or try an endpoint's transformation",
    "poll_endpoints": "read and acknowledge a polling endpoint's deliveries",
}


def digest(token: str) -> bytes:
    """What is stored of a token: its SHA-256, never the token."""
    return hashlib.sha256(token.encode()).digest()


def is_session_token(token: str) -> bool:
    return token.startswith(SESSION_PREFIX)


@dataclass(frozen=True)
class Visitor:
    """Who a request acts for: one customer within what its session allows, or -- with every
    capability -- a tenant (its key on a customer-scoped route)."""

    scope: Scope
    capabilities: frozenset[str]
    actor: Actor  # who the audit trail says changed what this request changes

    def may(self, capability: str) -> bool:
        return capability in self.capabilities

    def require(self, capability: str) -> None:
        if not self.may(capability):
            raise Forbidden(f"this portal session may not {_SAID[capability]}")


def tenant_visitor(tenant_id: str, actor: Actor) -> Visitor:
    return Visitor(Scope(tenant_id), frozenset(CAPABILITIES), actor)


async def visitor_for(session: AsyncSession, session_token: str) -> Visitor:
    if not is_session_token(session_token) or len(session_token) > 100:
        raise Unauthorized("this portal session is not valid: open the portal again")
    live = await customer_sessions.find(session, digest(session_token))
    if live is None:
        raise Unauthorized(
            "this portal session has ended (it expired, was revoked, or its customer or the "
            "key that opened it was): open the portal again"
        )
    return Visitor(
        Scope(live.tenant_id, live.customer_id),
        frozenset(live.capabilities),
        Actor("portal_session", live.id),
    )
