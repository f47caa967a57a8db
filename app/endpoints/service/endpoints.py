"""Endpoints: destinations, vetted by the SSRF guard on every save; their credentials (sealed
at rest) are credentials.py's."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.service import audit
from app.core.actors import Actor
from app.core.errors import Conflict, HeraldError, NotFound
from app.core.fields import subscribes_to_herald
from app.core.ids import new_id
from app.core.scope import Scope
from app.core.sealing import KeyRing
from app.endpoints.repository import endpoints, transformations

# Other domains reach the endpoints table only through this service (make lint): what they read
# of an endpoint and the one thing they do to it (disable on 410 Gone).
from app.endpoints.repository.destination_health import FlowLimits as FlowLimits
from app.endpoints.repository.destination_health import disable as disable
from app.endpoints.repository.destination_health import flow_limits as flow_limits
from app.endpoints.repository.endpoints import Subscriber as Subscriber
from app.endpoints.repository.endpoints import get_any as get_any
from app.endpoints.repository.endpoints import get_live as get_live
from app.endpoints.repository.endpoints import get_live_many as get_live_many
from app.endpoints.repository.endpoints import ids_in_scope as ids_in_scope
from app.endpoints.repository.endpoints import in_scope as in_scope
from app.endpoints.repository.endpoints import operational_subscribers as operational_subscribers
from app.endpoints.repository.endpoints import subscribed_to as subscribed_to
from app.endpoints.repository.transformations import (
    transformation_sent_as as transformation_sent_as,
)

# The header rule's syntax, which every send holds the endpoint's stored headers to again.
from app.endpoints.schemas import EndpointCreate
from app.endpoints.schemas import header_fault as header_fault
from app.endpoints.service import credentials, handshakes, save_checks
from app.endpoints.service.audit_views import endpoint_view

# Changing an endpoint has a module of its own; its callers find it here beside the rest.
from app.endpoints.service.changes import update_endpoint as update_endpoint
from app.endpoints.service.customer_fields import check_customer_fields
from app.endpoints.service.destinations import IPNetwork, check_endpoint_url
from app.models import Endpoint
from app.signals.service import signals
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
    by: Actor,
) -> credentials.WithSecret:
    """``consent``: the receiver's, from the webhook handshake, when the spec requires one
    (handshakes.for_create says so; the route asks the receiver first). The endpoint belongs
    to the scope's customer, or to the one the spec names: a live customer of the tenant,
    locked so that its deletion waits for this endpoint (and deletes it too) -- locked last,
    after the URLs' checks (DNS), so that no deletion waits on a resolver. The tenant's row is
    locked just before it, so that its endpoints are counted against its limits one creation
    at a time."""
    check_customer_fields(scope, spec)
    save_checks.check_delivery_fields(spec.delivery, spec, made=True)
    if spec.webhook_handshake and consent is None:
        raise Conflict("the endpoint requires the webhook handshake: ask its receiver first")
    if spec.url is not None:
        await check_endpoint_url(spec.url, allowlist)
    if spec.oauth2 is not None:
        await save_checks.check_token_url(spec.oauth2.token_url, allowlist)
    if spec.egress_proxy is not None:
        await save_checks.check_egress_proxy(spec.egress_proxy, allowlist)
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
    operational = subscribes_to_herald(spec.event_types)
    save_checks.check_operational(operational, scope.customer_id or spec.customer_id)
    held = await limits.hold(session, scope.tenant_id, defaults)
    customer_id = await _customer_for(session, scope, spec.customer_id)
    await save_checks.room_for_one_more(session, scope.tenant_id, customer_id, held)
    if spec.filter is not None:
        await save_checks.room_for_filter(session, scope.tenant_id, spec.filter)
    save_checks.check_transformation_format(spec.payload_format, spec.transformation)
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
        operational=operational,
        **values,
    )
    if spec.transformation is not None:
        await transformations.add_version(
            session, scope.tenant_id, endpoint_id, spec.transformation
        )
    await signals.endpoint_created(session, endpoint)
    await audit.record(
        session, scope.tenant_id, by, "endpoint.created", endpoint.id, after=endpoint_view(endpoint)
    )
    return credentials.WithSecret(endpoint, secret)


async def _customer_for(session: AsyncSession, scope: Scope, named: str | None) -> str | None:
    if scope.customer_id is not None and named not in (None, scope.customer_id):
        raise NotFound(f"customer {named} not found")  # another customer's, from its portal
    customer_id = scope.customer_id or named
    if customer_id is not None:
        await customers.get_customer(session, scope.tenant_id, customer_id, lock=True)
    return customer_id


async def get_endpoint(session: AsyncSession, scope: Scope, endpoint_id: str) -> Endpoint:
    endpoint = await endpoints.get_live(session, scope, endpoint_id)
    if endpoint is None:
        raise NotFound(f"endpoint {endpoint_id} not found")
    return endpoint


async def delete_endpoint(
    session: AsyncSession, scope: Scope, endpoint_id: str, *, by: Actor
) -> None:
    deleted = await endpoints.soft_delete(session, scope, endpoint_id)
    if deleted is None:
        raise NotFound(f"endpoint {endpoint_id} not found")
    await _deleted(session, deleted, by)


async def _deleted(session: AsyncSession, endpoint: Endpoint, by: Actor) -> None:
    await signals.endpoint_deleted(session, endpoint)
    await audit.record(
        session,
        endpoint.tenant_id,
        by,
        "endpoint.deleted",
        endpoint.id,
        before={"url": endpoint.url, "customer_id": endpoint.customer_id},
    )


async def delete_customer(session: AsyncSession, scope: Scope, *, by: Actor) -> list[str]:
    """The scope's customer deleted, and its endpoints with it (their history kept): the ids
    of the endpoints deleted. The customer first: an endpoint being made for it finishes
    before, and is deleted too."""
    assert scope.customer_id is not None
    await customers.mark_deleted(session, scope.tenant_id, scope.customer_id, by=by)
    deleted = await endpoints.delete_all_of(session, scope)
    for endpoint in deleted:
        await _deleted(session, endpoint, by)
    return [endpoint.id for endpoint in deleted]


async def list_endpoints(
    session: AsyncSession, scope: Scope, *, limit: int, before_id: str | None = None
) -> list[Endpoint]:
    """The tenant's endpoints, newest first."""
    return await endpoints.list_page(session, scope, limit=limit, before_id=before_id)


async def troubled_endpoints(session: AsyncSession, scope: Scope, *, limit: int) -> list[Endpoint]:
    """Disabled, paused or breaker-open endpoints: what an overview must show first."""
    return await endpoints.list_troubled(session, scope, limit=limit)
