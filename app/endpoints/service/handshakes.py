"""The CloudEvents webhook validation handshake (HTTP 1.1 Web Hooks for Event Delivery, section
4: abuse protection), as far as the endpoints own it: when a save must ask the receiver's
consent, and for what -- the URL with everything an attempt would reach it through (TLS
material, the endpoint's proxy, its static headers). The request itself is the engine's
(app/engine/service/handshake.py); the route runs it between two transactions, so no database
connection waits on a receiver."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.certificates import ClientTLS
from app.core.errors import Conflict, DestinationRefused, NotFound
from app.core.proxies import EgressProxy
from app.core.scope import Scope
from app.core.sealing import KeyRing, endpoint_purpose
from app.endpoints.repository import endpoints as rows
from app.endpoints.schemas import EndpointCreate, EndpointUpdate
from app.endpoints.service import credential_origins, credentials, save_checks
from app.endpoints.service.destinations import IPNetwork, check_endpoint_url
from app.models import Endpoint


@dataclass(frozen=True)
class HandshakeTarget:
    """What the validation request goes to, and how."""

    url: str
    headers: dict[str, str] = field(repr=False)  # the static ones: a gateway may ask for them
    tls: ClientTLS | None = field(repr=False)
    proxy_url: str | None = field(repr=False)  # the endpoint's own, credentials and all
    # WebHook-Request-Rate: the endpoint's own ceiling, in requests a minute (None: none).
    request_rate: int | None


@dataclass(frozen=True)
class Consent:
    """The receiver's answer that grants delivery: the origin it consented to, the rate."""

    url: str
    origin: str
    allowed_rate: int | None  # requests a minute; None: no ceiling of its own


def _rate(per_second: float | None) -> int | None:
    return None if per_second is None else max(1, math.ceil(per_second * 60))


def for_create(spec: EndpointCreate) -> HandshakeTarget | None:
    save_checks.check_delivery_fields(spec.delivery, spec, made=True)
    if not spec.webhook_handshake or spec.url is None:
        return None
    return HandshakeTarget(
        url=spec.url,
        headers={**spec.headers, **spec.secret_headers},
        tls=spec.tls.checked.tls if spec.tls is not None else None,
        proxy_url=spec.egress_proxy.url if spec.egress_proxy is not None else None,
        request_rate=_rate(spec.rate_limit_per_second),
    )


async def for_update(
    session: AsyncSession, scope: Scope, endpoint_id: str, change: EndpointUpdate, ring: KeyRing
) -> HandshakeTarget | None:
    """The handshake a change needs: when it turns the handshake on (or asks again), or
    changes the URL of an endpoint that requires it. None: no handshake."""
    current = await rows.get_live(session, scope, endpoint_id)
    if current is None:
        raise NotFound(f"endpoint {endpoint_id} not found")
    save_checks.check_delivery_fields(current.delivery, change, made=False)
    changed = change.model_fields_set
    required = change.webhook_handshake if "webhook_handshake" in changed else None
    if required is None:
        required = current.webhook_origin is not None
    new_url = change.url if change.url is not None else current.url
    asked = change.webhook_handshake is True
    if new_url is None or not required or not (asked or new_url != current.url):
        return None
    # The OPTIONS goes out before the change is saved: to another origin it carries only the
    # credentials the change itself gives, never those set for the old receiver -- a tenant's
    # move that leaves them unsaid is refused before anyone is asked, a customer's drops them.
    moved = credential_origins.origin(new_url) != credential_origins.origin(current.url or "")
    if moved and scope.customer_id is None:
        credential_origins.left_behind(scope, current, change)
    plain = change.headers if "headers" in changed else current.headers
    if "secret_headers" in changed:
        secret = change.secret_headers or {}  # null: none
    else:
        secret = {} if moved else credentials.secret_headers(ring, current)
    return HandshakeTarget(
        url=new_url,
        headers={**(plain or {}), **secret},
        tls=None if moved and "tls" not in changed else _tls(ring, change, current),
        proxy_url=_proxy(ring, change, current),
        request_rate=_rate(
            change.rate_limit_per_second
            if "rate_limit_per_second" in changed
            else current.rate_limit_per_second
        ),
    )


def _tls(ring: KeyRing, change: EndpointUpdate, current: Endpoint) -> ClientTLS | None:
    if "tls" in change.model_fields_set:
        return change.tls.checked.tls if change.tls is not None else None
    if current.tls_sealed is None:
        return None
    opened = credentials.opens(ring, current.tls_sealed, endpoint_purpose(current.id, "tls"))
    if opened is None:
        raise credentials.unreadable("TLS material", "set tls again")
    return ClientTLS.load(json.loads(opened))


def _proxy(ring: KeyRing, change: EndpointUpdate, current: Endpoint) -> str | None:
    if "egress_proxy" in change.model_fields_set:
        return change.egress_proxy.url if change.egress_proxy is not None else None
    if current.egress_proxy_sealed is None:
        return None
    purpose = endpoint_purpose(current.id, "proxy")
    opened = credentials.opens(ring, current.egress_proxy_sealed, purpose)
    if opened is None:
        raise credentials.unreadable("egress proxy", "set egress_proxy again")
    return opened


async def vet(target: HandshakeTarget, allowlist: Sequence[IPNetwork]) -> None:
    """Every rule a save holds the URL, the proxy, the headers and the TLS material to, held
    before the receiver is asked (the save checks them again): no request goes anywhere a
    save would refuse."""
    await check_endpoint_url(target.url, allowlist)
    if target.proxy_url is not None:
        try:
            await check_endpoint_url(
                EgressProxy.parse(target.proxy_url, trusted=False).url, allowlist
            )
        except DestinationRefused as exc:
            raise DestinationRefused(f"egress_proxy.url: {exc.detail}") from None
    credentials.check_header_sets(target.headers, {})
    credentials.check_tls_url(target.url, target.tls is not None)


def consent_values(consent: Consent | None, url: str | None, *, required: bool) -> dict[str, Any]:
    """The columns a save writes of the handshake: the consent it obtained for ``url`` (the
    URL the endpoint will have), none when it no longer requires one, nothing otherwise."""
    if consent is not None:
        if consent.url != url:  # the URL changed under the handshake (another save)
            raise Conflict("the endpoint's URL changed while its receiver was asked: try again")
        return {
            "webhook_origin": consent.origin,
            "webhook_allowed_rate": consent.allowed_rate,
            "webhook_validated_at": func.now(),
        }
    if not required:
        return {"webhook_origin": None, "webhook_allowed_rate": None, "webhook_validated_at": None}
    return {}
