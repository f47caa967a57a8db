"""The aiohttp session for Herald's requests other than attempts -- OAuth2 token requests and
webhook handshakes: it connects only to addresses the SSRF guard allows (the address checked
is the address used). Attempts have their own client (http_client.py)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from app.core.proxies import EgressProxy
from app.endpoints.service.destinations import IPNetwork, refusal
from app.engine.service.http_client import DestinationBlocked


class VettingResolver(AbstractResolver):
    """Resolves, then returns addresses only if every one is allowed. aiohttp connects to what
    this returns, so the address checked is the address used: no second lookup, no rebinding.
    ``trusted`` names the operator's own egress proxy, which may well be on a private network."""

    def __init__(self, allowlist: Sequence[IPNetwork], trusted: Sequence[str] = ()) -> None:
        self._inner = DefaultResolver()
        self._allowlist = tuple(allowlist)
        self._trusted = frozenset(trusted)

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        if host in self._trusted:
            return results
        addresses = [ipaddress.ip_address(result["host"]) for result in results]
        # Stored in the attempt row and dead_reason, which the tenant reads: `refusal` never
        # names the address a name resolved to.
        refused = refusal(host, addresses, self._allowlist)
        if refused is not None:
            raise DestinationBlocked(refused)
        return results

    async def close(self) -> None:
        await self._inner.close()


def vet_literal(host: str, allowlist: Sequence[IPNetwork]) -> None:
    """aiohttp skips the resolver for IP-literal hosts (verified), so check those here."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return
    refused = refusal(host, [address], allowlist)
    if refused is not None:
        raise DestinationBlocked(refused)


async def read_capped(response: aiohttp.ClientResponse, cap: int) -> bytes:
    chunks: list[bytes] = []
    remaining = cap
    while remaining > 0:
        chunk = await response.content.read(remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def build_http_session(
    allowlist: Sequence[IPNetwork],
    max_connections: int,
    proxy: EgressProxy | None = None,
    *,
    user_agent: str,
) -> aiohttp.ClientSession:
    """One pooled session per process; ``proxy``, HERALD_EGRESS_PROXY, is trusted to be
    reached wherever it is."""
    connector = aiohttp.TCPConnector(
        resolver=VettingResolver(allowlist, trusted=[proxy.host] if proxy else []),
        limit=max_connections,
        limit_per_host=0,
        ttl_dns_cache=10,
        enable_cleanup_closed=True,
    )
    return aiohttp.ClientSession(
        connector=connector,
        # The handshake's OPTIONS and the token requests say who sends, as deliveries do.
        headers={"User-Agent": user_agent},
        trust_env=False,  # no proxy from the environment: it would bypass the SSRF guard
        auto_decompress=False,
        cookie_jar=aiohttp.DummyCookieJar(),
    )
