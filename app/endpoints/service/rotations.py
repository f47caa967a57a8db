"""Rotating an endpoint's signing secret or ed25519 key pair: the new one signs from now on, the
current one beside it for the overlap (unless it is sealed under a lost key and cannot sign),
and the rotation is in the audit trail (never the secret)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.service import audit
from app.core.actors import Actor
from app.core.errors import NotFound
from app.core.scope import Scope
from app.core.sealing import KeyRing, endpoint_purpose
from app.endpoints.repository import endpoints
from app.endpoints.service.credentials import (
    WithSecret,
    generate_secret,
    key_pair_values,
    live_endpoint,
    opens,
    signing_secrets_sealed,
)
from app.models import Endpoint


async def rotate_secret(
    session: AsyncSession,
    scope: Scope,
    endpoint_id: str,
    overlap_hours: float,
    ring: KeyRing,
    *,
    by: Actor,
) -> WithSecret:
    current = await live_endpoint(session, scope, endpoint_id)
    if opens(ring, current.secret_sealed, endpoint_purpose(endpoint_id, "signing")) is None:
        overlap_hours = 0  # sealed under a lost key: it cannot sign beside the new one
    secret = generate_secret()
    endpoint = await endpoints.rotate_secret(
        session,
        scope,
        endpoint_id,
        sealed=signing_secrets_sealed(ring, endpoint_id, secret),
        overlap=timedelta(hours=overlap_hours),
    )
    if endpoint is None:
        raise NotFound(f"endpoint {endpoint_id} not found")
    await audit.record(session, scope.tenant_id, by, "endpoint.secret_rotated", endpoint_id)
    return WithSecret(endpoint, secret)


async def rotate_signing_key(
    session: AsyncSession,
    scope: Scope,
    endpoint_id: str,
    overlap_hours: float,
    ring: KeyRing,
    *,
    by: Actor,
) -> Endpoint:
    """A new ed25519 pair; the current one signs beside it for the overlap, unless there is
    none yet or it is sealed under a lost key."""
    current = await live_endpoint(session, scope, endpoint_id)
    purpose = endpoint_purpose(endpoint_id, "ed25519")
    if (
        current.signing_key_sealed is None
        or opens(ring, current.signing_key_sealed, purpose) is None
    ):
        overlap_hours = 0
    pair = key_pair_values(ring, endpoint_id)
    endpoint = await endpoints.rotate_signing_key(
        session,
        scope,
        endpoint_id,
        sealed=pair["signing_key_sealed"],
        public_key=pair["public_key"],
        overlap=timedelta(hours=overlap_hours),
    )
    if endpoint is None:
        raise NotFound(f"endpoint {endpoint_id} not found")
    await audit.record(session, scope.tenant_id, by, "endpoint.signing_key_rotated", endpoint_id)
    return endpoint
