"""Endpoints: destinations, vetted by the SSRF guard on every save; their credentials (sealed
at rest) are credentials.py's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import Conflict, DestinationRefused, HeraldError, NotFound
from app.core.ids import new_id
from app.core.proxies import EgressProxy
from app.core.scope import Scope
from app.core.sealing import KeyRing
from app.endpoints.repository import endpoints

# Other domains reach the endpoints table only through this service (make lint): what they read
# of an endpoint and the one thing they do to it (disable on 410 Gone).
from app.endpoints.repository.destination_health import FlowLimits as FlowLimits
from app.endpoints.repository.destination_health import disable as disable
from app.endpoints.repository.destination_health import flow_limits as flow_limits
from app.endpoints.repository.endpoints import Subscriber as Subscriber
from app.endpoints.repository.endpoints import get_any as get_any
from app.endpoints.repository.endpoints import get_live as get_live
from app.endpoints.repository.endpoints import get_live_many as get_live_many
from app.endpoints.repository.endpoints import in_scope as in_scope
from app.endpoints.repository.endpoints import subscribed_to as subscribed_to

# The header rule's syntax, which every send holds the endpoint's stored headers to again.
from app.endpoints.schemas import EndpointCreate, EndpointUpdate
from app.endpoints.schemas import header_fault as header_fault
from app.endpoints.schemas.credentials import EgressProxySpec
from app.endpoints.service import credential_origins, credentials, handshakes
from app.endpoints.service.destinations import IPNetwork, check_endpoint_url
from app.models import Endpoint
from app.programs.budget import FILTERS_PER_TENANT
from app.streams.service import policy
from app.tenants.service import customers, limits


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


async def create_endpoint(
    session: AsyncSession,
    scope: Scope,
    spec: EndpointCreate,
    allowlist: Sequence[IPNetwork],
    ring: KeyRing,
    consent: handshakes.Consent | None = None,
    *,
    defaults: limits.Limits,
) -> credentials.WithSecret:
    """``consent``: the receiver's, from the webhook handshake, when the spec requires one
    (handshakes.for_create says so; the route asks the receiver first). The endpoint belongs
    to the scope's customer, or to the one the spec names: a live customer of the tenant,
    locked so that its deletion waits for this endpoint (and deletes it too) -- locked last,
    after the URLs' checks (DNS), so that no deletion waits on a resolver. The tenant's row is
    locked just before it, so that its endpoints are counted against its limits one creation
    at a time."""
    if spec.webhook_handshake and consent is None:
        raise Conflict("the endpoint requires the webhook handshake: ask its receiver first")
    await check_endpoint_url(spec.url, allowlist)
    if spec.oauth2 is not None:
        await _check_token_url(spec.oauth2.token_url, allowlist)
    if spec.egress_proxy is not None:
        await _check_proxy(spec.egress_proxy, allowlist)
    endpoint_id = new_id("ep")
    secret = credentials.generate_secret()
    values = spec.model_dump(
        exclude={
            "secret_headers",
            "oauth2",
            "tls",
            "egress_proxy",
            "webhook_handshake",
            "customer_id",
        }
    )
    credentials.check_header_sets(spec.headers, spec.secret_headers, oauth2=spec.oauth2 is not None)
    credentials.check_tls_url(spec.url, spec.tls is not None)
    held = await limits.hold(session, scope.tenant_id, defaults)
    customer_id = await _customer_for(session, scope, spec.customer_id)
    await _room_for_one_more(session, scope.tenant_id, customer_id, held)
    if spec.filter is not None:
        await _room_for_filter(session, scope.tenant_id, spec.filter)
    endpoint = await endpoints.insert_endpoint(
        session,
        id=endpoint_id,
        tenant_id=scope.tenant_id,
        customer_id=customer_id,
        secret_sealed=credentials.signing_secrets_sealed(ring, endpoint_id, secret),
        disabled_reason=None if spec.enabled else "disabled by user",
        **credentials.key_pair_values(ring, endpoint_id),
        **credentials.secret_header_values(ring, endpoint_id, spec.secret_headers),
        **credentials.oauth2_values(ring, endpoint_id, spec.oauth2),
        **credentials.tls_values(ring, endpoint_id, spec.tls),
        **credentials.egress_proxy_values(ring, endpoint_id, spec.egress_proxy),
        **handshakes.consent_values(consent, spec.url, required=spec.webhook_handshake),
        **values,
    )
    return credentials.WithSecret(endpoint, secret)


async def _room_for_one_more(
    session: AsyncSession, tenant_id: str, customer_id: str | None, held: limits.Limits
) -> None:
    every, of_customer = await endpoints.count_live(session, tenant_id, customer_id)
    if every >= held.max_endpoints:
        raise Conflict(
            f"the tenant has {every:,} endpoints, as many as it may (max_endpoints, "
            "GET /v1/limits): delete one, or ask the operator for more"
        )
    if of_customer >= held.max_endpoints_per_customer:
        whose = f"customer {customer_id} has" if customer_id else "the tenant's own endpoints are"
        raise Conflict(
            f"{whose} {of_customer:,} endpoints, as many as one customer may "
            "(max_endpoints_per_customer, GET /v1/limits): delete one, or ask the operator for "
            "more"
        )


async def _room_for_filter(session: AsyncSession, tenant_id: str, source: str) -> None:
    """A tenant's distinct filters all fit its share of each API process's compiled filters
    (FILTERS_PER_TENANT): a tenant with more would make others pay for its compiles."""
    known, distinct = await endpoints.has_filter(session, tenant_id, source)
    if not known and distinct >= FILTERS_PER_TENANT:
        raise Conflict(
            f"the tenant's endpoints have {distinct:,} different filters, as many as it may "
            "have: give this endpoint a filter another already has, or none"
        )


async def _customer_for(session: AsyncSession, scope: Scope, named: str | None) -> str | None:
    if scope.customer_id is not None and named not in (None, scope.customer_id):
        raise NotFound(f"customer {named} not found")  # another customer's, from its portal
    customer_id = scope.customer_id or named
    if customer_id is not None:
        await customers.get_customer(session, scope.tenant_id, customer_id, lock=True)
    return customer_id


async def _check_token_url(url: str, allowlist: Sequence[IPNetwork]) -> None:
    """The token endpoint passes the endpoint's own SSRF guard, its refusal named for it."""
    try:
        await check_endpoint_url(url, allowlist)
    except DestinationRefused as exc:
        raise DestinationRefused(f"oauth2.token_url: {exc.detail}") from None


async def _check_proxy(spec: EgressProxySpec, allowlist: Sequence[IPNetwork]) -> None:
    """A tenant's proxy is a destination like any: it passes the SSRF guard (workers vet its
    address again on every connection)."""
    try:
        await check_endpoint_url(EgressProxy.parse(spec.url, trusted=False).url, allowlist)
    except DestinationRefused as exc:
        raise DestinationRefused(f"egress_proxy.url: {exc.detail}") from None


async def get_endpoint(session: AsyncSession, scope: Scope, endpoint_id: str) -> Endpoint:
    endpoint = await endpoints.get_live(session, scope, endpoint_id)
    if endpoint is None:
        raise NotFound(f"endpoint {endpoint_id} not found")
    return endpoint


async def update_endpoint(
    session: AsyncSession,
    scope: Scope,
    endpoint_id: str,
    change: EndpointUpdate,
    allowlist: Sequence[IPNetwork],
    ring: KeyRing,
    consent: handshakes.Consent | None = None,
) -> Endpoint:
    """``consent``: the receiver's, when handshakes.for_update said the change needs it."""
    values: dict[str, Any] = change.model_dump(
        exclude_unset=True, exclude={"tls", "egress_proxy", "webhook_handshake"}
    )
    if consent is not None or change.webhook_handshake is not None or change.url is not None:
        # Locked: a consent is for the URL the endpoint has when this commits, and a URL
        # change is judged by whether the endpoint requires consent when it commits.
        current = await endpoints.lock_live(session, scope, endpoint_id)
        if current is None:
            raise NotFound(f"endpoint {endpoint_id} not found")
        url = change.url or current.url
        if change.webhook_handshake and consent is None:
            raise Conflict("the endpoint's receiver must be asked first (the webhook handshake)")
        if consent is not None or change.webhook_handshake is False:
            values.update(handshakes.consent_values(consent, url, required=consent is not None))
        elif current.webhook_origin is not None and url != current.url:
            # Never a URL that did not consent (the route asks it first: this is a caller
            # that did not).
            raise Conflict("the new URL's receiver must consent first (the webhook handshake)")
        values.update(credential_origins.follow_url(scope, current, change, ring))
    if "egress_proxy" in change.model_fields_set:
        if change.egress_proxy is not None:
            await _check_proxy(change.egress_proxy, allowlist)
        values.update(credentials.egress_proxy_values(ring, endpoint_id, change.egress_proxy))
    if "tls" in change.model_fields_set or values.get("url") is not None:
        await _change_tls(session, scope, endpoint_id, change, values, ring)
    if (values.get("oauth2") or {}).get("token_url"):
        await _check_token_url(values["oauth2"]["token_url"], allowlist)
    if {"headers", "secret_headers", "oauth2"} & set(values):
        await credentials.change_headers(session, scope, endpoint_id, values, ring)
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
    for always_set in ("ordering", "on_dead", "signature_schemes"):
        if always_set in values and values[always_set] is None:
            del values[always_set]
    if "v1a" in values.get("signature_schemes", ()):
        current = await get_endpoint(session, scope, endpoint_id)
        if current.public_key is None:  # made before v1a existed
            values.update(credentials.key_pair_values(ring, endpoint_id))
    if "ordering" in values or "on_dead" in values:
        await _change_streams(session, scope, endpoint_id, values)
    if values.get("filter") is not None:
        await limits.lock(session, scope.tenant_id)  # counted one change at a time
        await _room_for_filter(session, scope.tenant_id, values["filter"])
    endpoint = await endpoints.update_fields(session, scope, endpoint_id, values)
    if endpoint is None:
        raise NotFound(f"endpoint {endpoint_id} not found")
    return endpoint


async def _change_tls(
    session: AsyncSession,
    scope: Scope,
    endpoint_id: str,
    change: EndpointUpdate,
    values: dict[str, Any],
    ring: KeyRing,
) -> None:
    """New TLS material (the one it replaces kept as the fallback), or a new URL, held to the
    rule that TLS material goes to https URLs only."""
    current = await get_endpoint(session, scope, endpoint_id)
    tls = values.get("tls_sealed", current.tls_sealed) is not None  # a URL change may drop it
    if "tls" in change.model_fields_set:
        values.update(credentials.tls_values(ring, endpoint_id, change.tls, current))
        tls = change.tls is not None
    elif values.get("url") not in (None, current.url):
        # A fallback was for the receiver that held the replaced certificate, not a new one.
        values.update(previous_tls_sealed=None, previous_tls=None, previous_tls_expires_at=None)
    credentials.check_tls_url(values.get("url") or current.url, tls)


async def _change_streams(
    session: AsyncSession, scope: Scope, endpoint_id: str, values: dict[str, Any]
) -> None:
    """A new ``ordering`` or ``on_dead`` applied to the endpoint's streams first (they are
    locked before the endpoint's row)."""
    current = await endpoints.get_live(session, scope, endpoint_id)
    if current is None:
        raise NotFound(f"endpoint {endpoint_id} not found")
    await policy.change(
        session,
        endpoint_id,
        ordering=(current.ordering, values.get("ordering", current.ordering)),
        on_dead=(current.on_dead, values.get("on_dead", current.on_dead)),
    )


async def delete_endpoint(session: AsyncSession, scope: Scope, endpoint_id: str) -> None:
    if not await endpoints.soft_delete(session, scope, endpoint_id):
        raise NotFound(f"endpoint {endpoint_id} not found")


async def delete_customer(session: AsyncSession, scope: Scope) -> list[str]:
    """The scope's customer deleted, and its endpoints with it (their history kept): the ids
    of the endpoints deleted. The customer first: an endpoint being made for it finishes
    before, and is deleted too."""
    assert scope.customer_id is not None
    await customers.mark_deleted(session, scope.tenant_id, scope.customer_id)
    return await endpoints.delete_all_of(session, scope)


async def list_endpoints(
    session: AsyncSession, scope: Scope, *, limit: int, before_id: str | None = None
) -> list[Endpoint]:
    """The tenant's endpoints, newest first."""
    return await endpoints.list_page(session, scope, limit=limit, before_id=before_id)


async def troubled_endpoints(session: AsyncSession, scope: Scope, *, limit: int) -> list[Endpoint]:
    """Disabled, paused or breaker-open endpoints: what an overview must show first."""
    return await endpoints.list_troubled(session, scope, limit=limit)
