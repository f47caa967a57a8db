"""Endpoints: destinations with their signing secret, vetted by the SSRF guard on every save.
Every secret is sealed here, before it reaches the repository, and opened here for the API
(app/sealing.py); the worker opens what its claim read (app/engine/service/envelope.py)."""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.endpoints.repository import endpoints

# Other domains reach the endpoints table only through this service (make lint): what they read
# of an endpoint and the one thing they do to it (disable on 410 Gone).
from app.endpoints.repository.endpoints import FlowLimits as FlowLimits
from app.endpoints.repository.endpoints import Subscriber as Subscriber
from app.endpoints.repository.endpoints import disable as disable
from app.endpoints.repository.endpoints import flow_limits as flow_limits
from app.endpoints.repository.endpoints import get_any as get_any
from app.endpoints.repository.endpoints import get_live as get_live
from app.endpoints.repository.endpoints import get_live_many as get_live_many
from app.endpoints.repository.endpoints import subscribed_to as subscribed_to

# The header rule's syntax, which every send holds the endpoint's stored headers to again.
from app.endpoints.schemas import EndpointCreate, EndpointUpdate, combined_header_fault
from app.endpoints.schemas import header_fault as header_fault
from app.endpoints.service.destinations import IPNetwork, check_endpoint_url
from app.errors import Conflict, HeraldError, NotFound, Unprocessable
from app.ids import new_id
from app.models import Endpoint
from app.sealing import KeyRing, SealedValueError, endpoint_purpose
from app.streams.service import policy

SECRET_PREFIX = "whsec_"  # noqa: S105  (a format prefix, not a secret)


def refusal_to_deliver(
    endpoint_id: str, *, found: bool, enabled: bool, disabled_reason: str | None
) -> HeraldError | None:
    """The one rule every accept path applies to its target: the endpoint exists for this
    tenant and is not deleted (else 404), and is enabled (else 409). None when it may be
    delivered to. Returned rather than raised: a batch reports it per item."""
    if not found:
        return NotFound(f"endpoint {endpoint_id} not found")
    if not enabled:
        return Conflict(f"endpoint {endpoint_id} is disabled ({disabled_reason})")
    return None


def refusal_for(endpoint_id: str, endpoint: Endpoint | None) -> HeraldError | None:
    """``refusal_to_deliver`` for an endpoint as looked up (None: not found)."""
    return refusal_to_deliver(
        endpoint_id,
        found=endpoint is not None,
        enabled=endpoint is not None and endpoint.enabled,
        disabled_reason=endpoint.disabled_reason if endpoint is not None else None,
    )


def generate_secret() -> str:
    """Standard Webhooks secret: ``whsec_`` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


@dataclass(frozen=True)
class WithSecret:
    """An endpoint and its signing secret in plain text: the answer that shows it once."""

    endpoint: Endpoint
    secret: str


def signing_secrets_sealed(ring: KeyRing, endpoint_id: str, secret: str) -> bytes:
    return ring.seal(secret, endpoint_purpose(endpoint_id, "signing"))


def _secret_header_values(
    ring: KeyRing, endpoint_id: str, headers: dict[str, str]
) -> dict[str, Any]:
    """The columns that hold secret headers: their names in the clear, the values sealed."""
    if not headers:
        return {"secret_headers_sealed": None, "secret_header_names": []}
    sealed = ring.seal(json.dumps(headers), endpoint_purpose(endpoint_id, "headers"))
    return {"secret_headers_sealed": sealed, "secret_header_names": sorted(headers)}


def secret_headers(ring: KeyRing, endpoint: Endpoint) -> dict[str, str]:
    if endpoint.secret_headers_sealed is None:
        return {}
    purpose = endpoint_purpose(endpoint.id, "headers")
    opened = _opens(ring, endpoint.secret_headers_sealed, purpose)
    if opened is None:
        raise _unreadable("secret headers", "set secret_headers again")
    headers: dict[str, str] = json.loads(opened)
    return headers


def _check_header_sets(plain: dict[str, str], secret: dict[str, str]) -> None:
    """The plain and the secret static headers together, under the one rule for headers."""
    overlap = {name.lower() for name in plain} & {name.lower() for name in secret}
    if overlap:
        raise Unprocessable(
            f"the header {min(overlap)} is both a header and a secret header: give it once"
        )
    fault = combined_header_fault({**plain, **secret})
    if fault is not None:
        raise Unprocessable(fault)


async def create_endpoint(
    session: AsyncSession,
    tenant_id: str,
    spec: EndpointCreate,
    allowlist: Sequence[IPNetwork],
    ring: KeyRing,
) -> WithSecret:
    await check_endpoint_url(spec.url, allowlist)
    endpoint_id = new_id("ep")
    secret = generate_secret()
    values = spec.model_dump(exclude={"secret_headers"})
    _check_header_sets(spec.headers, spec.secret_headers)
    endpoint = await endpoints.insert_endpoint(
        session,
        id=endpoint_id,
        tenant_id=tenant_id,
        secret_sealed=signing_secrets_sealed(ring, endpoint_id, secret),
        disabled_reason=None if spec.enabled else "disabled by user",
        **_secret_header_values(ring, endpoint_id, spec.secret_headers),
        **values,
    )
    return WithSecret(endpoint, secret)


def _opens(ring: KeyRing, sealed: bytes, purpose: str) -> str | None:
    """``sealed`` opened, or None when the ring cannot open it (a lost key: docs/operations.md,
    "Secrets at rest")."""
    try:
        return ring.open_text(sealed, purpose)
    except SealedValueError:
        return None


def _unreadable(what: str, remedy: str) -> Conflict:
    return Conflict(
        f"the endpoint's {what} is sealed under a key HERALD_SECRET_KEYS no longer holds: {remedy}"
    )


async def signing_secret(
    session: AsyncSession, tenant_id: str, endpoint_id: str, ring: KeyRing
) -> str:
    endpoint = await get_endpoint(session, tenant_id, endpoint_id)
    opened = _opens(ring, endpoint.secret_sealed, endpoint_purpose(endpoint.id, "signing"))
    if opened is None:
        raise _unreadable("signing secret", "rotate it to make a new one")
    return opened


async def get_endpoint(session: AsyncSession, tenant_id: str, endpoint_id: str) -> Endpoint:
    endpoint = await endpoints.get_live(session, tenant_id, endpoint_id)
    if endpoint is None:
        raise NotFound(f"endpoint {endpoint_id} not found")
    return endpoint


async def update_endpoint(
    session: AsyncSession,
    tenant_id: str,
    endpoint_id: str,
    change: EndpointUpdate,
    allowlist: Sequence[IPNetwork],
    ring: KeyRing,
) -> Endpoint:
    values: dict[str, Any] = change.model_dump(exclude_unset=True)
    if "headers" in values or "secret_headers" in values:
        await _change_headers(session, tenant_id, endpoint_id, values, ring)
    if values.get("url") is not None:
        await check_endpoint_url(values["url"], allowlist)
    for always_set in ("url", "payload_format"):
        if always_set in values and values[always_set] is None:
            del values[always_set]  # an endpoint always has one; null is "no change"
    if "headers" in values and values["headers"] is None:
        values["headers"] = {}
    if values.get("enabled") is True:
        # Re-enabling clears whatever disabled it, including a breaker's or a 410's verdict.
        values.update(
            disabled_reason=None,
            paused_until=None,
            pause_reason=None,
            consecutive_failures=0,
            failing_since=None,
            breaker_trips=0,
        )
    elif values.get("enabled") is False:
        values["disabled_reason"] = "disabled by user"
    elif "enabled" in values:
        del values["enabled"]
    for always_set in ("ordering", "on_dead"):
        if always_set in values and values[always_set] is None:
            del values[always_set]
    if "ordering" in values or "on_dead" in values:
        await _change_streams(session, tenant_id, endpoint_id, values)
    endpoint = await endpoints.update_fields(session, tenant_id, endpoint_id, values)
    if endpoint is None:
        raise NotFound(f"endpoint {endpoint_id} not found")
    return endpoint


async def _change_headers(
    session: AsyncSession,
    tenant_id: str,
    endpoint_id: str,
    values: dict[str, Any],
    ring: KeyRing,
) -> None:
    """New plain or secret headers, held with the ones kept to the rule for both together."""
    current = await get_endpoint(session, tenant_id, endpoint_id)
    plain = values.get("headers", current.headers) or {}
    if "secret_headers" in values:
        secret = values.pop("secret_headers") or {}
        values.update(_secret_header_values(ring, endpoint_id, secret))
    else:
        secret = secret_headers(ring, current)
    values["headers"] = plain
    _check_header_sets(plain, secret)


async def _change_streams(
    session: AsyncSession, tenant_id: str, endpoint_id: str, values: dict[str, Any]
) -> None:
    """A new ``ordering`` or ``on_dead`` applied to the endpoint's streams first (they are
    locked before the endpoint's row)."""
    current = await endpoints.get_live(session, tenant_id, endpoint_id)
    if current is None:
        raise NotFound(f"endpoint {endpoint_id} not found")
    await policy.change(
        session,
        endpoint_id,
        ordering=(current.ordering, values.get("ordering", current.ordering)),
        on_dead=(current.on_dead, values.get("on_dead", current.on_dead)),
    )


async def rotate_secret(
    session: AsyncSession, tenant_id: str, endpoint_id: str, overlap_hours: float, ring: KeyRing
) -> WithSecret:
    current = await get_endpoint(session, tenant_id, endpoint_id)
    if _opens(ring, current.secret_sealed, endpoint_purpose(endpoint_id, "signing")) is None:
        overlap_hours = 0  # sealed under a lost key: it cannot sign beside the new one
    secret = generate_secret()
    endpoint = await endpoints.rotate_secret(
        session,
        tenant_id,
        endpoint_id,
        sealed=signing_secrets_sealed(ring, endpoint_id, secret),
        overlap=timedelta(hours=overlap_hours),
    )
    if endpoint is None:
        raise NotFound(f"endpoint {endpoint_id} not found")
    return WithSecret(endpoint, secret)


async def delete_endpoint(session: AsyncSession, tenant_id: str, endpoint_id: str) -> None:
    if not await endpoints.soft_delete(session, tenant_id, endpoint_id):
        raise NotFound(f"endpoint {endpoint_id} not found")


async def list_endpoints(
    session: AsyncSession, tenant_id: str, *, limit: int, before_id: str | None = None
) -> list[Endpoint]:
    """The tenant's endpoints, newest first."""
    return await endpoints.list_page(session, tenant_id, limit=limit, before_id=before_id)


async def troubled_endpoints(
    session: AsyncSession, tenant_id: str, *, limit: int
) -> list[Endpoint]:
    """Disabled, paused or breaker-open endpoints: what an overview must show first."""
    return await endpoints.list_troubled(session, tenant_id, limit=limit)


async def reseal_page(
    session: AsyncSession, ring: KeyRing, *, after_id: str, limit: int
) -> tuple[str | None, int]:
    """Re-seal one page of endpoints' secrets under the ring's sealing key: the last id seen
    (None: no more pages) and how many values were re-sealed."""
    page = await endpoints.sealed_page(session, after_id=after_id, limit=limit)
    resealed = 0
    for endpoint_id, columns in page:
        for column, sealed in columns.items():
            if sealed is None:
                continue
            purpose = endpoint_purpose(endpoint_id, endpoints.SEALED_COLUMNS[column])
            fresh = ring.reseal(sealed, purpose)
            if fresh is not None and await endpoints.replace_sealed(
                session, endpoint_id, column, was=sealed, now=fresh
            ):
                resealed += 1
    return (page[-1][0] if page else None), resealed
