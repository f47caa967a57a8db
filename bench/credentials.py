"""What an endpoint's credentials cost an attempt, in this process: building one
attempt's headers (a signing secret, a secret header) with its secrets sealed at rest --
opened from the worker's cache, as every attempt after an endpoint's first is, and opened
afresh, as its first is -- beside building them from plain-text secrets, as before sealing;
the same with a v1a (ed25519) signature in place of v1; an OAuth2 token from the worker's
cache; and mutual TLS -- the worker's TLS context from its cache, and requests to a TLS
receiver on 127.0.0.1 that requires a client certificate, beside the same receiver over TLS
without one (pooled connections, and a new connection each).

    .venv/bin/python bench/credentials.py
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import json
import ssl
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script

from aiohttp import web

from app.core import certificates
from app.core.config import DEFAULT_USER_AGENT
from app.core.sealing import KeyRing, OpenedSecrets, endpoint_purpose, new_key
from app.endpoints.service.credentials import generate_secret
from app.endpoints.service.endpoints import header_fault
from app.endpoints.service.signing_keys import generate_key_pair
from app.engine.repository.delivery_leases import ClaimedDelivery, OAuth2Client
from app.engine.service import envelope
from app.engine.service.client_tls import ClientContexts
from app.engine.service.http_client import HttpClient
from app.engine.service.http_session import build_http_session
from app.engine.service.signing import signed_headers
from app.engine.service.tokens import Tokens
from tests.fixtures.tls import Authority, server_context

ROUNDS = 7
AGENT = DEFAULT_USER_AGENT
CALLS = 2000


def _per_call_us(call: Callable[[], Any]) -> float:
    """The median over ROUNDS of the mean time of one call, in microseconds."""
    rounds = []
    for _ in range(ROUNDS):
        started = time.perf_counter_ns()
        for _ in range(CALLS):
            call()
        rounds.append((time.perf_counter_ns() - started) / CALLS / 1000)
    return median(rounds)


def _claimed(
    ring: KeyRing, secret: str, headers: dict[str, str], schemes: list[str]
) -> ClaimedDelivery:
    endpoint_id = "ep_bench"
    private = generate_key_pair().private
    return ClaimedDelivery(
        id="dlv_bench",
        endpoint_id=endpoint_id,
        attempt_number=1,
        attempts_used=1,
        url="http://127.0.0.1:9/x",
        sealed_secrets=[ring.seal(secret, endpoint_purpose(endpoint_id, "signing"))],
        signature_schemes=schemes,
        sealed_keys=[ring.seal(private, endpoint_purpose(endpoint_id, "ed25519"))],
        event_id="evt_bench",
        endpoint_enabled=True,
        endpoint_deleted=False,
        payload=json.dumps({"order": 7, "pad": "x" * 1000}).encode(),
        payload_format="raw",
        headers={},
        sealed_headers=ring.seal(json.dumps(headers), endpoint_purpose(endpoint_id, "headers")),
        event_type="order.paid",
        event_at=datetime.now(UTC),
        traceparent=None,
        lease_left=45.0,
        token=uuid.uuid4(),
        tenant_id="ten_bench",
    )


def measure() -> dict[str, Any]:
    ring = KeyRing.parse(new_key("bench-1"))
    secret = generate_secret()
    headers = {"Authorization": "Bearer " + "t" * 40}
    claimed = _claimed(ring, secret, headers, ["v1"])
    asymmetric = _claimed(ring, secret, headers, ["v1a"])
    cache = OpenedSecrets(ring)

    def plain() -> None:  # what request_headers did before secrets were sealed
        assert header_fault(headers) is None
        {
            **headers,
            **envelope.stream_headers(claimed),
            **signed_headers(claimed.id, claimed.payload, [secret]),
        }

    def cached() -> None:
        envelope.request_headers(claimed, claimed.payload, {}, cache, user_agent=AGENT)

    def uncached() -> None:
        envelope.request_headers(
            claimed, claimed.payload, {}, OpenedSecrets(ring), user_agent=AGENT
        )

    def v1a() -> None:
        envelope.request_headers(asymmetric, asymmetric.payload, {}, cache, user_agent=AGENT)

    plain_us, cached_us, uncached_us, v1a_us = (
        _per_call_us(f) for f in (plain, cached, uncached, v1a)
    )
    return {
        "plain_us": plain_us,
        "cached_us": cached_us,
        "uncached_us": uncached_us,
        "v1a_us": v1a_us,
        "cached_extra_us": cached_us - plain_us,
        "ratio": cached_us / plain_us,
    }


async def _token_cache_hit_us() -> float:
    """One attempt's OAuth2 token from the worker's cache, after one real fetch from a token
    endpoint on 127.0.0.1 (the cost every attempt but a token's first pays)."""

    async def token(request: web.Request) -> web.Response:
        return web.json_response({"access_token": "t", "token_type": "Bearer", "expires_in": 3600})

    app = web.Application()
    app.router.add_post("/token", token)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    ring = KeyRing.parse(new_key("bench-1"))
    http = build_http_session([ipaddress.ip_network("127.0.0.0/8")], 10, user_agent=AGENT)
    try:
        tokens = Tokens(http, OpenedSecrets(ring), [ipaddress.ip_network("127.0.0.0/8")], 10)
        claimed = dataclasses.replace(
            _claimed(ring, generate_secret(), {}, ["v1"]),
            oauth2=OAuth2Client(
                token_url=f"http://127.0.0.1:{port}/token",
                client_id="bench",
                scope=None,
                audience=None,
                sealed_secret=ring.seal("s", endpoint_purpose("ep_bench", "oauth2")),
            ),
        )
        await tokens.bearer(claimed)  # the one fetch
        rounds = []
        for _ in range(ROUNDS):
            started = time.perf_counter_ns()
            for _ in range(CALLS):
                await tokens.bearer(claimed)
            rounds.append((time.perf_counter_ns() - started) / CALLS / 1000)
        assert tokens.fetches == 1
        return median(rounds)
    finally:
        await http.close()
        await runner.cleanup()


MTLS_REQUESTS = 300


async def _round_us(
    http: HttpClient, url: str, context: ssl.SSLContext, *, new_connections: bool
) -> float:
    """The mean time of one POST to ``url`` over ``context`` on the attempts' client, over
    MTLS_REQUESTS; ``new_connections``: each on a connection of its own."""
    started = time.perf_counter_ns()
    for _ in range(MTLS_REQUESTS):
        exchange = await http.open_request(url, {}, b"{}", tls=context, cap=65536)
        try:
            answer = await exchange.answer()
            await exchange.body()
            assert answer.status == 200
        finally:
            exchange.release()
        if new_connections:
            http.close()  # the idle connection too
    return (time.perf_counter_ns() - started) / MTLS_REQUESTS / 1000


async def _mtls(directory: Path) -> dict[str, Any]:
    authority = Authority(directory)
    cert, key = authority.client_certificate("bench-client")
    ring = KeyRing.parse(new_key("bench-1"))
    material = certificates.check(certificates.ClientTLS(cert, key, authority.ca_pem())).tls
    sealed = ring.seal(json.dumps(material.dump()), endpoint_purpose("ep_bench", "tls"))
    claimed = dataclasses.replace(
        _claimed(ring, generate_secret(), {}, ["v1"]), sealed_tls=[sealed]
    )
    started = time.perf_counter_ns()
    [mutual] = ClientContexts(ring).of(claimed)
    first_build_ms = (time.perf_counter_ns() - started) / 1e6
    contexts = ClientContexts(ring)
    contexts.of(claimed)
    cached_us = _per_call_us(lambda: contexts.of(claimed))
    plain = certificates.context(certificates.ClientTLS(None, None, authority.ca_pem()))

    async def hook(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(text="ok")

    figures: dict[str, Any] = {"context_first_ms": first_build_ms, "context_cached_us": cached_us}
    runners, targets = [], {}
    for name, requires in (("tls", None), ("mtls", authority)):
        app = web.Application()
        app.router.add_post("/hook", hook)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        served = server_context(authority, [], client_authority=requires)
        await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=served).start()
        runners.append(runner)
        url = f"https://127.0.0.1:{runner.addresses[0][1]}/hook"
        targets[name] = (url, mutual if requires else plain)
    try:
        for way, new_connections in (("pooled", False), ("new_connection", True)):
            loopback = [ipaddress.ip_network("127.0.0.0/8")]
            clients = {name: HttpClient(loopback, 10) for name in targets}
            rounds: dict[str, list[float]] = {name: [] for name in targets}
            try:
                for name, (url, context) in targets.items():  # warm: one connection each
                    await _round_us(clients[name], url, context, new_connections=new_connections)
                for _ in range(ROUNDS):  # alternated, so drift falls on both alike
                    for name, (url, context) in targets.items():
                        rounds[name].append(
                            await _round_us(
                                clients[name], url, context, new_connections=new_connections
                            )
                        )
            finally:
                for http in clients.values():
                    http.close()
            for name in targets:
                figures[f"{name}_{way}_us"] = median(rounds[name])
    finally:
        for runner in runners:
            await runner.cleanup()
    figures["pooled_ratio"] = figures["mtls_pooled_us"] / figures["tls_pooled_us"]
    figures["new_connection_ratio"] = (
        figures["mtls_new_connection_us"] / figures["tls_new_connection_us"]
    )
    return figures


def measure_all() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        mtls = asyncio.run(_mtls(Path(directory)))
    return {**measure(), "oauth2_cached_us": asyncio.run(_token_cache_hit_us()), "mtls": mtls}


if __name__ == "__main__":
    print(json.dumps(measure_all(), indent=2))
