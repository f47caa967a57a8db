"""An endpoint's credentials: the signing secret (v1), the ed25519 pair (v1a), the secret static
headers, OAuth2 client credentials, TLS material. Each is sealed here before it reaches the
repository and opened here for the API (app/core/sealing.py); the worker opens what its claim read
(app/engine/service/envelope.py, client_tls.py)."""

from __future__ import annotations

import base64
import json
import secrets
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import func
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import Conflict, NotFound, Unprocessable
from app.core.proxies import EgressProxy
from app.core.scope import Scope
from app.core.sealing import KeyRing, SealedValueError, endpoint_purpose
from app.endpoints.repository import endpoints
from app.endpoints.repository import sealed as sealed_columns
from app.endpoints.schemas import EndpointUpdate, combined_header_fault
from app.endpoints.schemas.credentials import EgressProxySpec, OAuth2Spec
from app.endpoints.schemas.tls import ClientTLSSpec
from app.endpoints.service import signing_keys
from app.models import Endpoint

SECRET_PREFIX = "whsec_"  # noqa: S105  (a format prefix, not a secret)


async def live_endpoint(session: AsyncSession, scope: Scope, endpoint_id: str) -> Endpoint:
    endpoint = await endpoints.get_live(session, scope, endpoint_id)
    if endpoint is None:
        raise NotFound(f"endpoint {endpoint_id} not found")
    return endpoint


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


def secret_header_values(
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
    opened = opens(ring, endpoint.secret_headers_sealed, purpose)
    if opened is None:
        raise unreadable("secret headers", "set secret_headers again")
    headers: dict[str, str] = json.loads(opened)
    return headers


def check_header_sets(
    plain: dict[str, str], secret: dict[str, str], *, oauth2: bool = False
) -> None:
    """The plain and the secret static headers together, under the one rule for headers; with
    OAuth2, ``Authorization`` is Herald's."""
    overlap = {name.lower() for name in plain} & {name.lower() for name in secret}
    if overlap:
        raise Unprocessable(
            f"the header {min(overlap)} is both a header and a secret header: give it once"
        )
    if oauth2 and "authorization" in {name.lower() for name in [*plain, *secret]}:
        raise Unprocessable(
            "the header Authorization carries the OAuth2 token: remove it, or remove oauth2"
        )
    fault = combined_header_fault({**plain, **secret})
    if fault is not None:
        raise Unprocessable(fault)


def key_pair_values(ring: KeyRing, endpoint_id: str) -> dict[str, Any]:
    """A new ed25519 pair for v1a: every endpoint has one, whichever schemes it signs with, so
    turning v1a on never changes the public key a receiver may already hold."""
    pair = signing_keys.generate_key_pair()
    sealed = ring.seal(pair.private, endpoint_purpose(endpoint_id, "ed25519"))
    return {"signing_key_sealed": sealed, "public_key": pair.public}


def opens(ring: KeyRing, sealed: bytes, purpose: str) -> str | None:
    """``sealed`` opened, or None when the ring cannot open it (a lost key: docs/operations.md,
    "Secrets at rest")."""
    try:
        return ring.open_text(sealed, purpose)
    except SealedValueError:
        return None


def unreadable(what: str, remedy: str) -> Conflict:
    return Conflict(
        f"the endpoint's {what} is sealed under a key HERALD_SECRET_KEYS no longer holds: {remedy}"
    )


async def signing_secret(
    session: AsyncSession, scope: Scope, endpoint_id: str, ring: KeyRing
) -> str:
    endpoint = await live_endpoint(session, scope, endpoint_id)
    opened = opens(ring, endpoint.secret_sealed, endpoint_purpose(endpoint.id, "signing"))
    if opened is None:
        raise unreadable("signing secret", "rotate it to make a new one")
    return opened


def header_values(change: EndpointUpdate, current: Endpoint, ring: KeyRing) -> dict[str, Any]:
    """The columns of new plain or secret headers or OAuth2 credentials, held with the ones
    kept to the rule for all of them together."""
    plain = (change.headers if change.sent("headers") else current.headers) or {}
    values: dict[str, Any] = {"headers": plain}
    if change.sent("secret_headers"):
        secret = change.secret_headers or {}
        values.update(secret_header_values(ring, current.id, secret))
    else:
        secret = secret_headers(ring, current)
    oauth2 = current.oauth2 is not None
    if change.sent("oauth2"):
        values.update(oauth2_values(ring, current.id, change.oauth2))
        oauth2 = change.oauth2 is not None
    check_header_sets(plain, secret, oauth2=oauth2)
    return values


def oauth2_values(ring: KeyRing, endpoint_id: str, spec: OAuth2Spec | None) -> dict[str, Any]:
    """The columns of OAuth2 client credentials: the settings in the clear, the secret sealed."""
    if spec is None:
        return {"oauth2": None, "oauth2_secret_sealed": None}
    settings = spec.model_dump(exclude={"client_secret"})
    sealed = ring.seal(spec.client_secret, endpoint_purpose(endpoint_id, "oauth2"))
    return {"oauth2": settings, "oauth2_secret_sealed": sealed}


def tls_values(
    ring: KeyRing, endpoint_id: str, spec: ClientTLSSpec | None, current: Endpoint | None = None
) -> dict[str, Any]:
    """The columns of an endpoint's TLS material: sealed as one value, what identifies it in
    the clear. Replacing material keeps what it replaces as the fallback for the overlap --
    unless that is sealed under a lost key; removing it removes the fallback too."""
    if spec is None:
        return dict.fromkeys(_TLS_COLUMNS)
    purpose = endpoint_purpose(endpoint_id, "tls")
    checked = spec.checked
    values: dict[str, Any] = {
        "tls_sealed": ring.seal(json.dumps(checked.tls.dump()), purpose),
        "tls": checked.facts,
        "previous_tls_sealed": None,
        "previous_tls": None,
        "previous_tls_expires_at": None,
    }
    kept = current.tls_sealed if current is not None else None
    if kept is not None and spec.overlap_hours > 0 and opens(ring, kept, purpose) is not None:
        values.update(
            previous_tls_sealed=kept,
            previous_tls=current.tls if current is not None else None,
            previous_tls_expires_at=func.now() + timedelta(hours=spec.overlap_hours),
        )
    return values


_TLS_COLUMNS = (
    "tls_sealed",
    "tls",
    "previous_tls_sealed",
    "previous_tls",
    "previous_tls_expires_at",
)


def egress_proxy_values(
    ring: KeyRing, endpoint_id: str, spec: EgressProxySpec | None
) -> dict[str, Any]:
    """The columns of an endpoint's own egress proxy: its URL sealed (it may carry
    credentials), what may be shown of it in the clear."""
    if spec is None:
        return {"egress_proxy_sealed": None, "egress_proxy": None}
    proxy = EgressProxy.parse(spec.url, trusted=False)
    shown = {"url": proxy.url, "credentials": bool(proxy.headers)}
    sealed = ring.seal(spec.url, endpoint_purpose(endpoint_id, "proxy"))
    return {"egress_proxy_sealed": sealed, "egress_proxy": shown}


def check_tls_url(url: str | None, tls: bool) -> None:
    """TLS material means TLS: an endpoint carrying it sends to https URLs only."""
    if tls and not (url or "").lower().startswith("https://"):
        raise Unprocessable(
            "tls is for https URLs: the endpoint's url must be https while tls is set"
        )


@dataclass
class Resealed:
    """What a rotation did to a page: how many values it re-sealed, and those it could not
    open (a lost key, a damaged value), by endpoint and column -- left as they are."""

    count: int = 0
    unopened: list[tuple[str, str]] = field(default_factory=list)


async def reseal_page(
    session: AsyncSession, ring: KeyRing, *, after_id: str, limit: int, into: Resealed
) -> str | None:
    """Re-seal one page of endpoints' secrets under the ring's sealing key, counting into
    ``into``; the last id seen (None: no more pages)."""
    page = await sealed_columns.sealed_page(session, after_id=after_id, limit=limit)
    for endpoint_id, columns in page:
        for column, sealed in columns.items():
            if sealed is None:
                continue
            purpose = endpoint_purpose(endpoint_id, sealed_columns.SEALED_COLUMNS[column])
            try:
                fresh = ring.reseal(sealed, purpose)
            except SealedValueError:
                into.unopened.append((endpoint_id, column))
                continue
            if fresh is not None and await sealed_columns.replace_sealed(
                session, endpoint_id, column, was=sealed, now=fresh
            ):
                into.count += 1
    return page[-1][0] if page else None
