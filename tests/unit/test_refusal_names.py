"""A refused address is refused by the name of the special range it is in -- the most specific
one: ``::1`` is the loopback address, though it also lies in the IPv4-compatible ``::/96``."""

from __future__ import annotations

import ipaddress

import pytest

from app.endpoints.service.destinations import refusal, refusal_reason

# One address from every special range the guard refuses, and the reason it is given.
NAMED = [
    ("0.0.0.0", "is the unspecified address (0.0.0.0/32)"),
    ("0.1.2.3", "is a 'this network' address (0.0.0.0/8)"),
    ("10.1.2.3", "is a private address (10.0.0.0/8)"),
    ("100.64.0.1", "is a carrier-grade NAT shared address (100.64.0.0/10)"),
    ("127.0.0.1", "is a loopback address (127.0.0.0/8)"),
    ("127.255.0.9", "is a loopback address (127.0.0.0/8)"),
    ("169.254.169.254", "is a link-local address (169.254.0.0/16)"),
    ("172.16.0.1", "is a private address (172.16.0.0/12)"),
    ("192.0.0.1", "is an IETF protocol assignment (192.0.0.0/24)"),
    ("192.0.2.1", "is a documentation address (192.0.2.0/24)"),
    ("192.168.1.1", "is a private address (192.168.0.0/16)"),
    ("198.18.0.1", "is a benchmarking address (198.18.0.0/15)"),
    ("198.51.100.1", "is a documentation address (198.51.100.0/24)"),
    ("203.0.113.1", "is a documentation address (203.0.113.0/24)"),
    ("224.0.0.1", "is a multicast address (224.0.0.0/4)"),
    ("240.0.0.1", "is a reserved address (240.0.0.0/4)"),
    ("255.255.255.255", "is the limited broadcast address (255.255.255.255/32)"),
    ("::", "is the unspecified address (::/128)"),
    ("::1", "is the loopback address (::1/128)"),
    ("::127.0.0.1", "is an IPv4-compatible address (::/96)"),
    ("::ffff:127.0.0.1", "is an IPv4-mapped address (::ffff:0:0/96)"),
    ("::ffff:8.8.8.8", "is an IPv4-mapped address (::ffff:0:0/96)"),
    ("::ffff:0:7f00:1", "is an IPv4-translated address (::ffff:0:0:0/96)"),
    ("64:ff9b::7f00:1", "is a NAT64 address (64:ff9b::/96)"),
    ("64:ff9b:1::1", "is a local-use NAT64 address (64:ff9b:1::/48)"),
    ("100::1", "is a discard-only address (100::/64)"),
    ("2001::1", "is a Teredo address (2001::/32)"),
    ("2001:2::1", "is a benchmarking address (2001:2::/48)"),
    ("2001:10::1", "is an ORCHID address (2001:10::/28)"),
    ("2001:100::1", "is an IETF protocol assignment (2001::/23)"),
    ("2001:db8::1", "is a documentation address (2001:db8::/32)"),
    ("2002:7f00:1::", "is a 6to4 address (2002::/16)"),
    ("fd00::1", "is a unique local address (fc00::/7)"),
    ("fe80::1", "is a link-local address (fe80::/10)"),
    ("fec0::1", "is a site-local address (fec0::/10)"),
    ("ff02::1", "is a multicast address (ff00::/8)"),
]


@pytest.mark.parametrize(("address", "reason"), NAMED)
def test_a_refused_address_is_named_by_its_own_range(address: str, reason: str) -> None:
    assert refusal_reason(ipaddress.ip_address(address), ()) == reason


def test_ipv6_loopback_is_called_loopback_not_a_translation_address() -> None:
    said = refusal("::1", [ipaddress.ip_address("::1")], ())
    assert said == "::1 is the loopback address (::1/128)"


@pytest.mark.parametrize("address", ["8.8.8.8", "2606:4700:4700::1111", "192.0.0.9"])
def test_a_public_address_in_no_refused_range_has_no_reason(address: str) -> None:
    assert refusal_reason(ipaddress.ip_address(address), ()) is None
