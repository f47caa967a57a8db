"""Sending through an egress proxy (HTTP, CONNECT for https) without giving up the SSRF guard:
Herald resolves and vets the destination itself, then asks the proxy for the *address* it
vetted -- never the name -- so the proxy has nothing to resolve and DNS rebinding has nowhere
to happen. The name still travels where the receiver needs it: the Host header, and for https
the TLS server name (SNI) and the certificate check.

Run the proxy on the addresses you publish to receivers and every attempt leaves from them
(docs/operations.md, "An egress proxy")."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from yarl import URL

from app.core.config import Settings
from app.core.errors import DestinationRefused
from app.core.proxies import EgressProxy
from app.core.sealing import OpenedSecrets, SealedValueError, endpoint_purpose
from app.endpoints.service.destinations import IPAddress, IPNetwork, refusal, resolve
from app.engine.repository.delivery_leases import ClaimedDelivery
from app.engine.service.envelope import RequestNotBuilt


def from_settings(settings: Settings) -> EgressProxy | None:
    """HERALD_EGRESS_PROXY, or None when attempts go out directly."""
    if settings.egress_proxy is None:
        return None
    return EgressProxy.parse(settings.egress_proxy.get_secret_value(), trusted=True)


def endpoint_proxy(claimed: ClaimedDelivery, opened: OpenedSecrets) -> EgressProxy | None:
    """The endpoint's own egress proxy, opened once per process; None when it has none."""
    if claimed.sealed_proxy is None:
        return None
    purpose = endpoint_purpose(claimed.endpoint_id, "proxy")
    try:
        proxy: EgressProxy = opened.open_parsed(claimed.sealed_proxy, purpose, _untrusted)
    except SealedValueError as exc:
        raise RequestNotBuilt(f"the egress proxy: {exc}") from None
    except ValueError:
        raise RequestNotBuilt("the egress proxy is not http://host:port (set it again)") from None
    return proxy


def _untrusted(url: str) -> EgressProxy:
    return EgressProxy.parse(url, trusted=False)


@dataclass(frozen=True)
class Pinned:
    """A request's URL with its host replaced by the address Herald vetted."""

    url: str
    host_header: str | None  # https to a name: the authority as the tenant wrote it
    server_hostname: str | None  # https to a name: the SNI and the certificate's name


class ResolveFailed(Exception):
    """The destination's name did not resolve just now: a lookup to try again later, not a
    refusal by the guard (a direct send meets the same as aiohttp's DNS error, retried)."""


async def pin(url: str, allowlist: Sequence[IPNetwork]) -> Pinned:
    """Resolve and vet ``url``'s host (every address must pass, as for a direct send) and
    point the request at the first address. Raises DestinationRefused when it may not go,
    ResolveFailed when the name does not resolve now.

    The host is judged as it goes on the wire (yarl's IDNA 2008 ``raw_host``), as the direct
    path's resolver judges it: Python's resolver would encode a Unicode name by IDNA 2003,
    and ``faß.de`` is another domain than ``xn--fa-hia.de``."""
    parsed = URL(url)
    host = parsed.raw_host or ""
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    literal = _literal(host)
    if literal is not None:
        refused = refusal(host, [literal], allowlist)
        if refused is not None:
            raise DestinationRefused(refused)
        return Pinned(url, None, None)
    try:
        addresses = await resolve(host, port)
    except DestinationRefused as exc:
        raise ResolveFailed(str(exc)) from None
    refused = refusal(host, addresses, allowlist)
    if refused is not None:
        raise DestinationRefused(refused)
    pinned = str(parsed.with_host(str(addresses[0])))
    if parsed.scheme == "https":
        # Inside the tunnel: the name for SNI, the certificate check and Host.
        authority = (parsed.raw_authority or "").rpartition("@")[2]
        return Pinned(pinned, authority, host)
    # Plain http goes in absolute form, and a proxy may route by Host: the address only, so
    # no name reaches the proxy at all (the receiver sees the address as Host).
    return Pinned(pinned, None, None)


async def pinned_proxy(proxy: EgressProxy, allowlist: Sequence[IPNetwork]) -> EgressProxy:
    """An endpoint's proxy at the address it was vetted at, never its name: the session's
    resolver trusts the operator's proxy by name, and a tenant's proxy must not reach it (or
    its host's other ports) by naming it. Raises DestinationRefused, ResolveFailed."""
    parsed = URL(proxy.url)
    host = parsed.raw_host or ""
    literal = _literal(host)
    if literal is not None:
        addresses = [literal]
    else:
        try:
            addresses = await resolve(host, parsed.port or 80)
        except DestinationRefused as exc:
            raise ResolveFailed(f"egress proxy: {exc}") from None
    refused = refusal(host, addresses, allowlist)
    if refused is not None:
        raise DestinationRefused(f"egress proxy: {refused}")
    url = str(parsed.with_host(str(addresses[0])))
    return EgressProxy(url, proxy.headers, trusted=False)


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


@dataclass(frozen=True)
class Route:
    """How one request goes out: its URL and headers, and aiohttp's proxy arguments."""

    url: str
    headers: dict[str, str]
    through: dict[str, Any]


async def route(
    url: str, headers: dict[str, str], allowlist: Sequence[IPNetwork], proxy: EgressProxy
) -> Route:
    """The request to ``url`` through ``proxy``, pinned to the address vetted here -- and an
    endpoint's own proxy, a destination too, pinned to its vetted address as well."""
    if not proxy.trusted:
        proxy = await pinned_proxy(proxy, allowlist)
    pinned = await pin(url, allowlist)
    if pinned.host_header is not None:
        headers = {**headers, "Host": pinned.host_header}
    else:
        headers = dict(headers)
    through: dict[str, Any] = {"proxy": proxy.url}
    if URL(pinned.url).scheme == "https":
        # On the CONNECT only: the request itself goes through the tunnel.
        through["proxy_headers"] = proxy.headers
        if pinned.server_hostname is not None:
            through["server_hostname"] = pinned.server_hostname
    else:  # absolute form: the request is the proxy's to read (and to strip)
        headers.update(proxy.headers)
    return Route(pinned.url, headers, through)
