"""The worker's pooled HTTP session: it connects only to addresses the SSRF guard allows (the
address checked is the address used), and its trace hooks tell an attempt how far it got --
whether its request went out, and whether its lease still covered writing it."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from app.core.proxies import EgressProxy
from app.endpoints.service.destinations import IPNetwork, refusal


class DestinationBlocked(Exception):
    """Raised from the resolver, deliberately not an OSError, so aiohttp does not wrap it into
    an ordinary connection error: a refusal is its own outcome (``blocked``)."""


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


async def _on_headers_sent(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: Any
) -> None:
    context.trace_request_ctx["progress"].sent = True


class LeaseEndedBeforeWriting(Exception):
    """The connection was ready only after the lease's last moment to start: the request is
    not written (another worker may hold the delivery by now, and an ordered stream may have
    moved past it)."""


async def _on_connection(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: Any
) -> None:
    """Once the connection is made or taken from the pool, nothing but CPU stands between this
    check and the request's first bytes: a worker frozen (SIGSTOP, a VM pause) while it
    connected cannot write a request its lease no longer covers."""
    write_by = context.trace_request_ctx["progress"].write_by
    if write_by is not None and asyncio.get_running_loop().time() > write_by:
        raise LeaseEndedBeforeWriting("the lease ended before the request was written")


def build_http_session(
    allowlist: Sequence[IPNetwork], max_connections: int, proxy: EgressProxy | None = None
) -> aiohttp.ClientSession:
    """One pooled session per worker process; ``proxy``, HERALD_EGRESS_PROXY, is trusted to be
    reached wherever it is."""
    trace = aiohttp.TraceConfig()
    trace.on_request_headers_sent.append(_on_headers_sent)
    trace.on_connection_create_end.append(_on_connection)
    trace.on_connection_reuseconn.append(_on_connection)
    connector = aiohttp.TCPConnector(
        resolver=VettingResolver(allowlist, trusted=[proxy.host] if proxy else []),
        limit=max_connections,
        limit_per_host=0,
        ttl_dns_cache=10,
        enable_cleanup_closed=True,
    )
    return aiohttp.ClientSession(
        connector=connector,
        trace_configs=[trace],
        trust_env=False,  # no proxy from the environment: it would bypass the SSRF guard
        auto_decompress=False,
        cookie_jar=aiohttp.DummyCookieJar(),
    )
