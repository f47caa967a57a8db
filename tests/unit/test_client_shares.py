"""Who a connection to `herald api` counts against (app/api/client_shares.py): an IPv4 address,
an IPv6 /64, an IPv4-mapped peer as its IPv4 address, a trusted proxy as no one -- and the
share each is held to. Peers are given as a transport's peername is: (host, port[, flow,
scope]). This machine's loopback has one IPv6 address, so the /64 is shown here; the real
sockets (tests/system/test_api_server.py) show what loopback can."""

from __future__ import annotations

from app.api.client_shares import ClientShares, client_of

UVICORN_DEFAULT = "127.0.0.1,::1"  # FORWARDED_ALLOW_IPS unless set


def v6(host: str) -> tuple[str, int, int, int]:
    return (host, 50_000, 0, 0)


def test_addresses_in_one_ipv6_64_are_one_client_and_share_one_share() -> None:
    # The failure mode: 2001:db8::/64 is one customer's, and it may use any address in it.
    # Counted per address, four connections from each of four addresses would all be held.
    share = 4
    shares = ClientShares()
    flood = [client_of(v6(f"2001:db8::{n:x}"), UVICORN_DEFAULT) for n in range(1, 17)]
    assert set(flood) == {"2001:db8::/64"}
    held = [shares.take(client, share) for client in flood if client is not None]
    assert held == [True] * share + [False] * (len(flood) - share)
    # A neighbouring /64 is another customer: its share is whole.
    neighbour = client_of(v6("2001:db8:0:1::1"), UVICORN_DEFAULT)
    assert neighbour == "2001:db8:0:1::/64"
    assert shares.take(neighbour, share)
    # Given back, the share is taken again from any address in the /64.
    shares.give_back("2001:db8::/64")
    again = client_of(v6("2001:db8::ffff:ffff:ffff:ffff"), UVICORN_DEFAULT)
    assert again == "2001:db8::/64"
    assert shares.take(again, share)
    assert not shares.take(again, share)


def test_ipv4_clients_are_counted_per_address() -> None:
    shares = ClientShares()
    first = client_of(("203.0.113.7", 50_000), UVICORN_DEFAULT)
    second = client_of(("203.0.113.8", 50_000), UVICORN_DEFAULT)
    assert (first, second) == ("203.0.113.7", "203.0.113.8")
    assert first is not None and second is not None
    assert shares.take(first, 1)
    assert not shares.take(first, 1)
    assert shares.take(second, 1)


def test_an_ipv4_mapped_peer_is_its_ipv4_address_not_a_64() -> None:
    # On a dual-stack socket every IPv4 peer is ::ffff:a.b.c.d, all in ::ffff:0:0/64: keyed
    # by the /64, every IPv4 client would share one share.
    mapped = client_of(v6("::ffff:203.0.113.7"), UVICORN_DEFAULT)
    assert mapped == "203.0.113.7"
    assert mapped == client_of(("203.0.113.7", 50_000), UVICORN_DEFAULT)
    assert client_of(v6("::ffff:203.0.113.8"), UVICORN_DEFAULT) == "203.0.113.8"


def test_trusted_proxies_count_against_no_share_over_either_protocol() -> None:
    allowed = "10.0.0.5, 2001:db8:ffff::10, fd00:1::/48"
    assert client_of(("10.0.0.5", 443), allowed) is None
    assert client_of(v6("2001:db8:ffff::10"), allowed) is None
    assert client_of(v6("fd00:1:0:7::99"), allowed) is None  # within a trusted network
    # The proxy alone is trusted, not its /64: a neighbour is a client like any other.
    assert client_of(v6("2001:db8:ffff::11"), allowed) == "2001:db8:ffff::/64"
    # A proxy on a dual-stack socket, listed as the IPv4 address it is or as mapped.
    assert client_of(v6("::ffff:10.0.0.5"), allowed) is None
    assert client_of(v6("::ffff:10.0.0.6"), "::ffff:10.0.0.6") is None
    assert client_of(v6("::ffff:10.0.0.7"), allowed) == "10.0.0.7"
    # uvicorn's defaults trust loopback over both; "*" trusts every peer.
    assert client_of(v6("::1"), UVICORN_DEFAULT) is None
    assert client_of(v6("::1"), "127.0.0.1") == "::/64"
    assert client_of(v6("2001:db8::1"), "*") is None
    assert client_of(v6("2001:db8::1"), ["10.0.0.5", "2001:db8::1"]) is None


def test_a_peer_with_no_ip_address_counts_against_no_share() -> None:
    assert client_of("/run/herald.sock", UVICORN_DEFAULT) is None  # a unix socket's peername
    assert client_of(None, UVICORN_DEFAULT) is None
    assert client_of(("localhost", 80), UVICORN_DEFAULT) is None
