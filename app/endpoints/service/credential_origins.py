"""Credentials follow the URL they were set for.

An endpoint's secret headers, OAuth2 client and TLS material were given for one receiver: the
origin (scheme, host and port) its URL had when they were set. A URL change that keeps the
origin (a new path) keeps them. One that moves to another origin never carries them along:

- the tenant must say what becomes of them in the same change -- state them again or remove
  them (null) -- or the change is refused, naming them: a typo in a host must not hand a
  bearer token to whoever holds that host;
- a customer (through the portal) is moving its own receiver, and was never given them: they
  are removed, and the log says which (by name, never by value).

The signing secret and keys are the endpoint's own (the receiver verifies with them; the
customer sees them), and an egress proxy's credentials go to the proxy, not the receiver:
neither is tied to the URL.
"""

from __future__ import annotations

import urllib.parse

import structlog

from app.core.errors import Unprocessable
from app.core.scope import Scope
from app.endpoints.schemas import EndpointUpdate
from app.models import Endpoint

log = structlog.get_logger()

_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme)


def held(endpoint: Endpoint) -> list[str]:
    """The credentials the endpoint holds that are tied to its URL, by their field names."""
    names = []
    if endpoint.secret_headers_sealed is not None:
        names.append("secret_headers")
    if endpoint.oauth2 is not None:
        names.append("oauth2")
    if endpoint.tls_sealed is not None or endpoint.previous_tls_sealed is not None:
        names.append("tls")
    return names


def left_behind(scope: Scope, current: Endpoint, change: EndpointUpdate) -> list[str]:
    """The credentials a URL change removes, by field name, so that none reaches an origin it
    was not set for (the change clears them as if it sent them as null); Unprocessable when
    the tenant moved the origin without saying what becomes of them."""
    if change.url is None or current.url is None or origin(change.url) == origin(current.url):
        return []
    left = [name for name in held(current) if name not in change.model_fields_set]
    if not left:
        return []
    if scope.customer_id is None:
        listed = ", ".join(left)
        raise Unprocessable(
            f"the URL moves to another origin, and {listed} were set for the old one: send "
            f"{'it' if len(left) == 1 else 'them'} again with the new URL, or null to remove "
            f"{'it' if len(left) == 1 else 'them'} (credentials never follow a URL to a "
            "receiver they were not given for)"
        )
    log.info(
        "endpoint.credentials_dropped",
        endpoint_id=current.id,
        customer_id=scope.customer_id,
        credentials=left,
        reason="the customer moved the URL to another origin",
    )
    return left
