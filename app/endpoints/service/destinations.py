"""SSRF guard: which destinations Herald may connect to.

Decisions are made on resolved addresses, never on the host string: ``getaddrinfo`` turns
``2130706433``, ``0x7f.1`` and ``017700000001`` into 127.0.0.1, so checking the string would
miss them. The same checks run when an endpoint is saved and again at every send.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

import structlog
from yarl import URL

from app.core.errors import DestinationRefused

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

MAX_URL_LENGTH = 2048

log = structlog.get_logger("herald.destinations")

# Ranges that `is_global` calls global but that reach, or can be steered to, internal hosts.
# Each is refused whole, even where it embeds a public IPv4 address: a destination is named by
# its own address, never by a translation of it.
_TRANSLATION_RANGES = tuple(
    ipaddress.ip_network(n)
    for n in (
        "64:ff9b::/96",  # NAT64 well-known prefix: 64:ff9b::7f00:1 is 127.0.0.1
        "64:ff9b:1::/48",  # NAT64 local-use prefix
        "2002::/16",  # 6to4: 2002:7f00:1:: embeds 127.0.0.1
        "2001::/32",  # Teredo: embeds an IPv4 server and client
        "::/96",  # IPv4-compatible IPv6 (deprecated), ::7f00:1
        "::ffff:0:0/96",  # IPv4-mapped (RFC 4291): ::ffff:127.0.0.1 is 127.0.0.1 to the kernel
        "::ffff:0:0:0/96",  # IPv4-translated (RFC 2765, SIIT): ::ffff:0:7f00:1 is 127.0.0.1
    )
)
_SHARED_ADDRESS_SPACE = ipaddress.ip_network("100.64.0.0/10")  # CGNAT: not is_private

# What a refusal calls an address: the special-purpose range it is in (IANA's IPv4 and IPv6
# special-purpose registries), the most specific first -- ::1 is the loopback address, though
# it lies in the IPv4-compatible ::/96 as well. Naming only: what is refused is decided above
# and by `is_global`, and an address refused in no range here is "not a public address".
_RANGE_NAMES = sorted(
    (
        (ipaddress.ip_network(network), name)
        for network, name in (
            ("0.0.0.0/32", "the unspecified address"),
            ("0.0.0.0/8", "a 'this network' address"),
            ("10.0.0.0/8", "a private address"),
            ("100.64.0.0/10", "a carrier-grade NAT shared address"),
            ("127.0.0.0/8", "a loopback address"),
            ("169.254.0.0/16", "a link-local address"),
            ("172.16.0.0/12", "a private address"),
            ("192.0.0.0/24", "an IETF protocol assignment"),
            ("192.0.2.0/24", "a documentation address"),
            ("192.168.0.0/16", "a private address"),
            ("198.18.0.0/15", "a benchmarking address"),
            ("198.51.100.0/24", "a documentation address"),
            ("203.0.113.0/24", "a documentation address"),
            ("224.0.0.0/4", "a multicast address"),
            ("240.0.0.0/4", "a reserved address"),
            ("255.255.255.255/32", "the limited broadcast address"),
            ("::/128", "the unspecified address"),
            ("::1/128", "the loopback address"),
            ("::/96", "an IPv4-compatible address"),
            ("::ffff:0:0/96", "an IPv4-mapped address"),
            ("::ffff:0:0:0/96", "an IPv4-translated address"),
            ("64:ff9b::/96", "a NAT64 address"),
            ("64:ff9b:1::/48", "a local-use NAT64 address"),
            ("100::/64", "a discard-only address"),
            ("2001::/23", "an IETF protocol assignment"),
            ("2001::/32", "a Teredo address"),
            ("2001:2::/48", "a benchmarking address"),
            ("2001:10::/28", "an ORCHID address"),
            ("2001:db8::/32", "a documentation address"),
            ("2002::/16", "a 6to4 address"),
            ("fc00::/7", "a unique local address"),
            ("fe80::/10", "a link-local address"),
            ("fec0::/10", "a site-local address"),
            ("ff00::/8", "a multicast address"),
        )
    ),
    key=lambda named: -named[0].prefixlen,
)


def _range_name(address: IPAddress) -> str:
    for network, name in _RANGE_NAMES:
        if address.version == network.version and address in network:
            return f"{name} ({network})"
    return "not a public address"


@dataclass(frozen=True)
class Destination:
    url: str
    scheme: str
    host: str
    port: int


def _normalise(address: IPAddress) -> IPAddress:
    """``::ffff:127.0.0.1`` as the IPv4 address it is, so that an allowlisted IPv4 network
    also admits its IPv4-mapped spelling."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def refusal_reason(address: IPAddress, allowlist: Sequence[IPNetwork]) -> str | None:
    """Why Herald must not connect to ``address``, by the range it is in (``"is the loopback
    address (::1/128)"``), or None when it may."""
    effective = _normalise(address)
    if any(effective in net or address in net for net in allowlist if net.version in (4, 6)):
        return None
    refused = (
        (
            isinstance(address, ipaddress.IPv6Address)
            and any(address in net for net in _TRANSLATION_RANGES)
        )
        or address in _SHARED_ADDRESS_SPACE
        or address.is_multicast
        or address.is_unspecified
        or not address.is_global
        # Site-local (fec0::/10, deprecated but still routed inside some networks) counts as
        # global to `is_global`.
        or (isinstance(address, ipaddress.IPv6Address) and address.is_site_local)
    )
    return f"is {_range_name(address)}" if refused else None


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def refusal(
    host: str, addresses: Iterable[IPAddress], allowlist: Sequence[IPNetwork]
) -> str | None:
    """Why ``host``, at ``addresses``, is refused -- in words a tenant may read -- or None.

    An IP literal is named (the tenant wrote it). A name's addresses are not: echoing them
    would let any tenant map internal DNS names through this message. The operator log keeps
    the address.
    """
    for address in addresses:
        reason = refusal_reason(address, allowlist)
        if reason is None:
            continue
        if _is_ip_literal(host):
            return f"{address} {reason}"
        log.info("destination.refused", host=host, address=str(address), reason=reason)
        return f"{host!r} resolves to a non-public address"
    return None


def _canonical_ipv4(host: str) -> str | None:
    """The dotted-quad form of ``host`` read as an IPv4 number the way ``inet_aton`` (and so
    ``getaddrinfo``) reads it -- ``2130706433``, ``0x7f.1``, ``127.1``, ``0177.0.0.1`` -- or
    None when it is no such number."""
    try:
        return str(ipaddress.IPv4Address(socket.inet_aton(host)))
    except OSError:
        return None


def _check_ipv4_spelling(host: str) -> None:
    """Refuse IPv4 addresses not written as four decimal numbers. ``getaddrinfo`` reads the
    legacy forms as addresses, but aiohttp refuses the all-digit ones when sending (the delivery
    went straight to ``dead``) and takes the others for names: what is saved must be what is
    sent, so there is one spelling."""
    if _is_ip_literal(host):
        return
    canonical = _canonical_ipv4(host)
    if canonical is not None:
        raise DestinationRefused(
            f"URL host {host!r} is not a canonical IPv4 address: write it as {canonical}"
        )
    if host.replace(".", "").isascii() and host.replace(".", "").isdigit():
        # aiohttp takes any all-digit host for an IPv4 address, and refuses this one.
        raise DestinationRefused(
            f"URL host {host!r} is not a valid IPv4 address: write four decimal numbers "
            "from 0 to 255, like 192.0.2.1"
        )


def parse_destination(url: str) -> Destination:
    """Structural rules for an endpoint URL; raises DestinationRefused with the broken rule."""
    if len(url) > MAX_URL_LENGTH:
        raise DestinationRefused(f"URL is longer than {MAX_URL_LENGTH} characters")
    try:
        parts: SplitResult = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise DestinationRefused(f"URL is malformed: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise DestinationRefused("URL scheme must be http or https")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise DestinationRefused("URL must not contain credentials (userinfo)")
    host = parts.hostname
    if not host:
        raise DestinationRefused("URL has no host")
    if any(ch.isspace() for ch in url):
        raise DestinationRefused("URL must not contain whitespace")
    # Judge the host as the sender's URL parser (yarl, under aiohttp) will spell it on the
    # wire: IDNA turns full-width digits into ASCII ones, so 2130706433 in full-width digits
    # is sent as the all-digit 2130706433.
    try:
        wire_host = URL(url).raw_host or host
    except ValueError as exc:
        raise DestinationRefused(f"URL is malformed: {exc}") from None
    _check_ipv4_spelling(wire_host)
    return Destination(
        url=url, scheme=scheme, host=host, port=port or (443 if scheme == "https" else 80)
    )


async def resolve(host: str, port: int) -> list[IPAddress]:
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise DestinationRefused(f"host {host!r} does not resolve: {exc}") from None
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        # Drop an IPv6 zone id ("fe80::1%eth0") before parsing; the address alone is judged.
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise DestinationRefused(f"host {host!r} does not resolve")
    return addresses


async def vet(host: str, port: int, allowlist: Sequence[IPNetwork]) -> list[IPAddress]:
    """Resolve ``host`` and return its addresses only if every one of them is allowed.

    All must pass, not just one: a name that resolves to a public and a private address would
    otherwise let the connection land on whichever the client happens to try.
    """
    addresses = await resolve(host, port)
    refused = refusal(host, addresses, allowlist)
    if refused is not None:
        raise DestinationRefused(refused)
    return addresses


async def check_endpoint_url(url: str, allowlist: Sequence[IPNetwork]) -> Destination:
    destination = parse_destination(url)
    await vet(destination.host, destination.port, allowlist)
    return destination
