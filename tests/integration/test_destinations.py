"""The SSRF guard refuses every form of a non-public address, however it is spelled."""

from __future__ import annotations

import ipaddress
from typing import Any

import httpx
import pytest

from app.core.config import Settings
from app.core.errors import DestinationRefused
from app.endpoints.service.destinations import check_endpoint_url, refusal_reason
from app.main import create_app
from tests.fixtures.api import new_endpoint, new_tenant
from tests.fixtures.observed import ip_addresses_in
from tests.fixtures.stack import client_for

REFUSED_URLS = [
    "http://127.0.0.1/",
    "http://localhost/",
    "http://[::1]/",
    "http://0.0.0.0/",
    "http://[::]/",
    "http://10.1.2.3/",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fe80::1]/",
    "http://100.64.0.1/",
    "http://100.127.255.254/",
    "http://[fd00::1]/",
    "http://[fc00::5]/",
    "http://[fec0::1]/",  # site-local (deprecated), which is_global calls global
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:10.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[2002:7f00:1::]/",
    "http://[2002:c0a8:101::1]/",
    "http://[::127.0.0.1]/",
    "http://[::ffff:0:7f00:1]/",  # IPv4-translated (RFC 2765) 127.0.0.1
    "http://[::ffff:0:a9fe:a9fe]/",  # IPv4-translated 169.254.169.254
    "http://[::ffff:0:808:808]/",  # IPv4-translated, even of a public address
    "http://[::ffff:8.8.8.8]/",  # IPv4-mapped, even of a public address
    "http://2130706433/",
    "http://0x7f.1/",
    "http://0x7f000001/",
    "http://017700000001/",
    "http://127.1/",
    "http://0177.0.0.1/",
    "http://224.0.0.1/",
    "http://255.255.255.255/",
    "https://127.0.0.1:8443/hook",
]

MALFORMED_URLS = [
    "ftp://example.com/",
    "file:///etc/passwd",
    "gopher://example.com/",
    "http://user:pass@example.com/",
    "http://user@example.com/",
    "http:///nohost",
    "http://example.com:99999/",
    "http://exa mple.com/",
    "http://example.com/" + "a" * 2048,
    "javascript:alert(1)",
]


@pytest.mark.parametrize("url", REFUSED_URLS)
async def test_non_public_destination_is_refused(url: str) -> None:
    with pytest.raises(DestinationRefused):
        await check_endpoint_url(url, allowlist=())


@pytest.mark.parametrize("url", MALFORMED_URLS)
async def test_malformed_destination_is_refused(url: str) -> None:
    with pytest.raises(DestinationRefused):
        await check_endpoint_url(url, allowlist=())


@pytest.mark.parametrize(
    "address",
    ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "93.184.215.14", "2a00:1450:4001:80b::200e"],
)
def test_public_addresses_are_allowed(address: str) -> None:
    assert refusal_reason(ipaddress.ip_address(address), ()) is None


async def test_public_ip_literal_is_allowed() -> None:
    destination = await check_endpoint_url("https://8.8.8.8/hook", allowlist=())
    assert destination.host == "8.8.8.8" and destination.port == 443


async def test_allowlist_exempts_only_its_networks() -> None:
    allow = (ipaddress.ip_network("127.0.0.0/8"),)
    await check_endpoint_url("http://127.0.0.1:8080/", allow)
    await check_endpoint_url("http://[::ffff:127.0.0.1]/", allow)
    with pytest.raises(DestinationRefused):
        await check_endpoint_url("http://10.0.0.1/", allow)
    with pytest.raises(DestinationRefused):
        await check_endpoint_url("http://[::1]/", allow)


async def test_unresolvable_host_is_refused() -> None:
    with pytest.raises(DestinationRefused, match="does not resolve"):
        await check_endpoint_url("https://no-such-host.invalid/", allowlist=())


# The suite's app allowlists loopback (its receivers live there), so these are other ranges.
@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/",
        "http://0xa9.0xfe.0xa9.0xfe/",  # 169.254.169.254, hex-encoded
        "http://2852039166/",  # 169.254.169.254 as one number
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[::ffff:0:a9fe:a9fe]/",
        "http://10.0.0.1/",
    ],
)
async def test_api_refuses_internal_destinations_with_422(
    client: httpx.AsyncClient, tenant: dict[str, str], url: str
) -> None:
    response = await client.post("/v1/endpoints", json={"url": url}, headers=tenant)
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["type"].endswith("/destination-refused")


async def test_patch_to_internal_url_is_refused_and_keeps_the_old_url(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    response = await client.patch(
        f"/v1/endpoints/{endpoint['id']}", json={"url": "http://10.0.0.7/"}, headers=tenant
    )
    assert response.status_code == 422
    current = await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)
    assert current.json()["url"] == endpoint["url"]


@pytest.mark.parametrize(
    "address",
    [
        "::ffff:0:0:0",  # IPv4-translated, ::ffff:0:0:0/96 (RFC 2765)
        "::ffff:0:7f00:1",
        "::ffff:0:808:808",
        "::ffff:0:ffff:ffff",
        "::ffff:0.0.0.0",  # IPv4-mapped, ::ffff:0:0/96 (RFC 4291)
        "::ffff:8.8.8.8",
        "::ffff:255.255.255.255",
    ],
)
def test_ipv4_translated_and_mapped_ranges_are_refused(address: str) -> None:
    assert refusal_reason(ipaddress.ip_address(address), ()) is not None


async def test_a_refused_name_does_not_reveal_its_address(settings: Settings) -> None:
    # Loopback is not allowlisted here, so `localhost` is an internal name like any other.
    strict = create_app(settings.model_copy(update={"destination_allowlist": ()}))
    async with strict.router.lifespan_context(strict), client_for(strict) as client:
        tenant = await new_tenant(client, "mapper")
        created = await client.post(
            "/v1/endpoints", json={"url": "http://localhost:9/hook"}, headers=tenant
        )
        endpoint = await new_endpoint(client, tenant, url="https://8.8.8.8/hook")
        patched = await client.patch(
            f"/v1/endpoints/{endpoint['id']}", json={"url": "http://localhost/"}, headers=tenant
        )
    for response in (created, patched):
        assert response.status_code == 422
        assert response.json()["type"].endswith("/destination-refused")
        assert "'localhost' resolves to a non-public address" in response.json()["detail"]
        assert ip_addresses_in(response.text) == set()


# What is saved must be what is sent: aiohttp refuses these forms at send time, so they are
# refused at save (even where the address itself is allowlisted, as loopback is here).
NON_CANONICAL_IPV4 = [
    ("2130706433", "127.0.0.1"),
    ("0x7f000001", "127.0.0.1"),
    ("017700000001", "127.0.0.1"),
    ("127.1", "127.0.0.1"),
    ("0x7f.0.0.1", "127.0.0.1"),
    ("0177.0.0.1", "127.0.0.1"),
    ("127.000.000.001", "127.0.0.1"),
]


@pytest.mark.parametrize(("host", "canonical"), NON_CANONICAL_IPV4)
async def test_non_canonical_ipv4_is_refused_when_created(
    client: httpx.AsyncClient, tenant: dict[str, str], host: str, canonical: str
) -> None:
    response = await client.post(
        "/v1/endpoints", json={"url": f"http://{host}:9/hook"}, headers=tenant
    )
    assert response.status_code == 422, response.text
    assert response.json()["detail"] == (
        f"URL host {host!r} is not a canonical IPv4 address: write it as {canonical}"
    )


@pytest.mark.parametrize(("host", "canonical"), NON_CANONICAL_IPV4)
async def test_non_canonical_ipv4_is_refused_when_updated(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    host: str,
    canonical: str,
) -> None:
    response = await client.patch(
        f"/v1/endpoints/{endpoint['id']}", json={"url": f"http://{host}:9/"}, headers=tenant
    )
    assert response.status_code == 422, response.text
    assert f"write it as {canonical}" in response.json()["detail"]
    current = await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)
    assert current.json()["url"] == endpoint["url"]


async def test_ipv4_in_other_digits_is_refused_as_the_sender_would_read_it(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    # Full-width digits: the sender's URL parser reads them as the all-digit 2130706433.
    full_width = "".join(chr(ord("\N{FULLWIDTH DIGIT ZERO}") + int(d)) for d in "2130706433")
    response = await client.post(
        "/v1/endpoints", json={"url": f"http://{full_width}:9/hook"}, headers=tenant
    )
    assert response.status_code == 422, response.text
    assert response.json()["detail"].endswith("write it as 127.0.0.1")
