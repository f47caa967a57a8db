"""An endpoint changed (PATCH, and the portal's and console's forms): one function per concern,
each turning the fields it owns into columns or refusing them. Which fields a change sets,
clears or leaves as they are is ``EndpointUpdate.sent``'s to say, once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.service import audit
from app.core.actors import Actor
from app.core.errors import Conflict, NotFound
from app.core.fields import subscribes_to_herald
from app.core.scope import Scope
from app.core.sealing import KeyRing
from app.endpoints.repository import endpoints, transformations
from app.endpoints.schemas import EndpointUpdate
from app.endpoints.service import credential_origins, credentials, handshakes, save_checks
from app.endpoints.service.audit_views import endpoint_view
from app.endpoints.service.customer_fields import check_customer_fields
from app.endpoints.service.destinations import IPNetwork, check_endpoint_url
from app.models import Endpoint
from app.signals.service import signals
from app.streams.service import policy
from app.tenants.service import limits

# The fields whose values are sealed, and never shown.
SEALED_FIELDS = ("secret_headers", "oauth2", "tls", "egress_proxy")

# The fields written to the endpoint's columns as the change sends them; the others are
# credentials (sealed) or decide columns of their own.
_WRITTEN_AS_SENT = (
    "url",
    "description",
    "event_types",
    "rate_limit_per_second",
    "max_in_flight",
    "payload_format",
    "signature_schemes",
    "filter",
    "transformation",
    "ordering",
    "on_dead",
    "final_statuses",
)


async def update_endpoint(
    session: AsyncSession,
    scope: Scope,
    endpoint_id: str,
    change: EndpointUpdate,
    allowlist: Sequence[IPNetwork],
    ring: KeyRing,
    consent: handshakes.Consent | None = None,
    *,
    by: Actor,
) -> Endpoint:
    """``consent``: the receiver's, when handshakes.for_update said the change needs it."""
    check_customer_fields(scope, change)
    current = await _current(session, scope, endpoint_id, change, consent)
    save_checks.check_delivery_fields(current.delivery, change, made=False)
    was = endpoint_view(current)  # before the update refreshes the same row
    values = _handshake_values(change, current, consent)
    # What a customer's move to another origin leaves behind is cleared, as if sent as null.
    change = change.model_copy(
        update=dict.fromkeys(credential_origins.left_behind(scope, current, change))
    )
    values |= await _egress_proxy_values(change, current, allowlist, ring)
    values |= _tls_values(change, current, ring)
    if change.sent("oauth2") and change.oauth2 is not None:
        await save_checks.check_token_url(change.oauth2.token_url, allowlist)
    if any(change.sent(name) for name in ("headers", "secret_headers", "oauth2")):
        values |= credentials.header_values(change, current, ring)
    if change.url is not None:
        await check_endpoint_url(change.url, allowlist)
    values |= _enabled_values(change)
    values |= _key_pair_values(change, current, ring)
    await _change_streams(session, change, current)
    if change.filter is not None:
        await limits.lock(session, scope.tenant_id)  # counted one change at a time
        await save_checks.room_for_filter(session, scope.tenant_id, change.filter)
    if change.sent("event_types"):
        values["operational"] = subscribes_to_herald(change.event_types)
        save_checks.check_operational(values["operational"], current.customer_id)
    save_checks.check_transformation_format(
        change.payload_format or current.payload_format,
        change.transformation if change.sent("transformation") else current.transformation,
    )
    values |= {name: getattr(change, name) for name in _WRITTEN_AS_SENT if change.sent(name)}
    endpoint = await endpoints.update_fields(session, scope, endpoint_id, values)
    if endpoint is None:
        raise NotFound(f"endpoint {endpoint_id} not found")
    if change.sent("transformation") and change.transformation != was["transformation"]:
        await transformations.add_version(
            session, scope.tenant_id, endpoint_id, change.transformation
        )
    await signals.endpoint_updated(session, endpoint, change.model_fields_set)
    now = endpoint_view(endpoint)
    # A credential's value is never in a view, so a new one under the same name would look
    # like no change: the trail names the credentials the change set instead.
    if replaced := sorted(change.model_fields_set & set(SEALED_FIELDS)):
        was, now = {**was, "credentials_set": []}, {**now, "credentials_set": replaced}
    await audit.record(
        session, scope.tenant_id, by, "endpoint.updated", endpoint.id, before=was, after=now
    )
    return endpoint


async def _current(
    session: AsyncSession,
    scope: Scope,
    endpoint_id: str,
    change: EndpointUpdate,
    consent: handshakes.Consent | None,
) -> Endpoint:
    """The endpoint as the change finds it -- locked when the change touches its URL or its
    handshake: a consent is for the URL the endpoint has when this commits, and a URL change
    is judged by whether the endpoint requires consent when it commits."""
    decides_consent = change.sent("url") or change.sent("webhook_handshake") or consent is not None
    read = endpoints.lock_live if decides_consent else endpoints.get_live
    current = await read(session, scope, endpoint_id)
    if current is None:
        raise NotFound(f"endpoint {endpoint_id} not found")
    return current


def _handshake_values(
    change: EndpointUpdate, current: Endpoint, consent: handshakes.Consent | None
) -> dict[str, Any]:
    """The receiver's consent recorded, or the handshake no longer required; refused when the
    change needs a consent it does not bring (the route asks the receiver first: a caller
    that did not)."""
    url = change.url or current.url
    if change.webhook_handshake and consent is None:
        raise Conflict("the endpoint's receiver must be asked first (the webhook handshake)")
    if consent is not None or change.webhook_handshake is False:
        return handshakes.consent_values(consent, url, required=consent is not None)
    if current.webhook_origin is not None and url != current.url:
        raise Conflict("the new URL's receiver must consent first (the webhook handshake)")
    return {}


async def _egress_proxy_values(
    change: EndpointUpdate, current: Endpoint, allowlist: Sequence[IPNetwork], ring: KeyRing
) -> dict[str, Any]:
    if not change.sent("egress_proxy"):
        return {}
    if change.egress_proxy is not None:
        await save_checks.check_egress_proxy(change.egress_proxy, allowlist)
    return credentials.egress_proxy_values(ring, current.id, change.egress_proxy)


def _tls_values(change: EndpointUpdate, current: Endpoint, ring: KeyRing) -> dict[str, Any]:
    """New TLS material (the one it replaces kept as the fallback), or a new URL, held to the
    rule that TLS material goes to https URLs only."""
    url = change.url or current.url
    if change.sent("tls"):
        values = credentials.tls_values(ring, current.id, change.tls, current)
        credentials.check_tls_url(url, change.tls is not None)
        return values
    if url != current.url:
        credentials.check_tls_url(url, current.tls_sealed is not None)
        # A fallback was for the receiver that held the replaced certificate, not a new one.
        return {"previous_tls_sealed": None, "previous_tls": None, "previous_tls_expires_at": None}
    return {}


def _enabled_values(change: EndpointUpdate) -> dict[str, Any]:
    if change.enabled is None:
        return {}
    if not change.enabled:
        return {"enabled": False, "disabled_reason": "disabled by user"}
    # Re-enabling clears whatever disabled it, including a breaker's or a 410's verdict.
    return {
        "enabled": True,
        "disabled_reason": None,
        "paused_until": None,
        "pause_reason": None,
        "consecutive_failures": 0,
        "failing_since": None,
        "breaker_trips": 0,
    }


def _key_pair_values(change: EndpointUpdate, current: Endpoint, ring: KeyRing) -> dict[str, Any]:
    """v1a turned on for an endpoint made before v1a existed: its first key pair."""
    v1a = change.signature_schemes is not None and "v1a" in change.signature_schemes
    if v1a and current.public_key is None:
        return credentials.key_pair_values(ring, current.id)
    return {}


async def _change_streams(session: AsyncSession, change: EndpointUpdate, current: Endpoint) -> None:
    """A new ``ordering`` or ``on_dead`` applied to the endpoint's streams first (they are
    locked before the endpoint's row)."""
    if change.ordering is None and change.on_dead is None:
        return
    await policy.change(
        session,
        current.id,
        ordering=(current.ordering, change.ordering or current.ordering),
        on_dead=(current.on_dead, change.on_dead or current.on_dead),
    )
