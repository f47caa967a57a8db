"""Each client's share of a `herald api` process's connections: which client a connection
counts against, and how many each client has open.

A client is its TCP peer's address, except over IPv6, where it is the peer's /64: an ISP hands
each IPv6 customer at least a /64, so one client can connect from as many addresses as it
likes inside it, and a share counted per address would be no share at all. An IPv4-mapped
IPv6 address (``::ffff:a.b.c.d``, how an IPv4 peer appears on a dual-stack socket, as uvicorn
binds ``--workers N`` on ``::``) is that IPv4 address: keyed by its /64, every IPv4 client of
the process would share one share. The proxies uvicorn trusts (FORWARDED_ALLOW_IPS) count
against no share: they carry many clients, each held to a share by the proxy.
"""

from __future__ import annotations

import functools
import ipaddress
from collections import Counter

# The prefix one IPv6 client is taken to hold: the least an ISP delegates to a customer.
IPV6_CLIENT_PREFIX = 64

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@functools.cache
def trusted_networks(forwarded_allow_ips: str) -> tuple[Network, ...] | None:
    """The proxies uvicorn trusts, as networks; None when it trusts every address ("*")."""
    entries = [entry.strip() for entry in forwarded_allow_ips.split(",") if entry.strip()]
    if "*" in entries:
        return None
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            continue  # a unix socket path or a name: no TCP peer is ever it
    return tuple(networks)


def client_of(peer: object, forwarded_allow_ips: str | list[str]) -> str | None:
    """The client a connection from ``peer`` (its transport's peername) counts against: its
    IPv4 address or its IPv6 /64. None for a proxy uvicorn trusts (``forwarded_allow_ips``,
    as uvicorn's config holds it), and for a peer that is no IP address (a unix socket)."""
    if not isinstance(peer, tuple) or not peer or not isinstance(peer[0], str):
        return None
    trusted = trusted_networks(
        forwarded_allow_ips
        if isinstance(forwarded_allow_ips, str)
        else ",".join(forwarded_allow_ips)
    )
    if trusted is None:
        return None
    try:
        address = ipaddress.ip_address(peer[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv4Address):
        return None if _within(address, trusted) else str(address)
    mapped = address.ipv4_mapped
    if mapped is not None:
        # Trusted written either way: as the IPv4 address an operator writes, or as the
        # mapped one uvicorn itself compares the peer with.
        return None if _within(mapped, trusted) or _within(address, trusted) else str(mapped)
    if _within(address, trusted):
        return None
    return str(ipaddress.ip_network(f"{address}/{IPV6_CLIENT_PREFIX}", strict=False))


def _within(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address, networks: tuple[Network, ...]
) -> bool:
    return any(address in network for network in networks)


class ClientShares:
    """How many connections each client has open in this process, each held to ``share``."""

    def __init__(self) -> None:
        self._open: Counter[str] = Counter()

    def take(self, client: str, share: int) -> bool:
        """Count one more connection against ``client``, unless it has its share open."""
        if self._open[client] >= share:
            return False
        self._open[client] += 1
        return True

    def give_back(self, client: str) -> None:
        self._open[client] -= 1
        if not self._open[client]:
            del self._open[client]  # no entry left behind for each client ever seen
