"""Endpoints: destinations with their signing secret, vetted by the SSRF guard on every save."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Sequence
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
from app.endpoints.schemas import EndpointCreate, EndpointUpdate

# The header rule's syntax, which every send holds the endpoint's stored headers to again.
from app.endpoints.schemas import header_fault as header_fault
from app.endpoints.service.destinations import IPNetwork, check_endpoint_url
from app.errors import Conflict, HeraldError, NotFound
from app.ids import new_id
from app.models import Endpoint
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


async def create_endpoint(
    session: AsyncSession, tenant_id: str, spec: EndpointCreate, allowlist: Sequence[IPNetwork]
) -> Endpoint:
    await check_endpoint_url(spec.url, allowlist)
    return await endpoints.insert_endpoint(
        session,
        id=new_id("ep"),
        tenant_id=tenant_id,
        secret=generate_secret(),
        disabled_reason=None if spec.enabled else "disabled by user",
        **spec.model_dump(),
    )


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
) -> Endpoint:
    values: dict[str, Any] = change.model_dump(exclude_unset=True)
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
    session: AsyncSession, tenant_id: str, endpoint_id: str, overlap_hours: float
) -> Endpoint:
    endpoint = await endpoints.rotate_secret(
        session,
        tenant_id,
        endpoint_id,
        secret=generate_secret(),
        overlap=timedelta(hours=overlap_hours),
    )
    if endpoint is None:
        raise NotFound(f"endpoint {endpoint_id} not found")
    return endpoint


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
