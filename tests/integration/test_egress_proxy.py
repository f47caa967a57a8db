"""Attempts through an egress proxy (HERALD_EGRESS_PROXY), Debian's tinyproxy with Basic
credentials: the proxy is asked for the address Herald vetted, never the name, so it resolves
nothing and cannot be steered by DNS; a name that now resolves to a refused address never
reaches the proxy at all; the proxy's own failure is not held against the receiver."""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import SecretStr
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks.webhooks import Webhook

from app.core.config import Settings
from tests.fixtures.api import new_endpoint, post_deliveries
from tests.fixtures.engine import pump
from tests.fixtures.forward_proxy import (
    PASSWORD,
    USER,
    ForwardProxy,
    localhost_addresses,
)
from tests.fixtures.oauth import CLIENT_ID, CLIENT_SECRET, running_authorization
from tests.fixtures.receiver import Receiver
from tests.fixtures.waiting import attempts_of, eventually, wait_state


async def test_the_proxy_is_asked_for_the_vetted_address_never_the_name(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    forward_proxy: ForwardProxy,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    assert localhost_addresses() == {"127.0.0.1"}, "this test names the receiver `localhost`"
    endpoint = await new_endpoint(client, tenant, url=f"http://localhost:{receiver.port}/via-proxy")
    [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
    async with pump(settings, engine, egress_proxy=SecretStr(forward_proxy.url)) as (running, _):
        running.start()
        await wait_state(engine, delivery, "succeeded")

    [sent] = receiver.on("/via-proxy")
    # Plain http through a proxy is absolute-form, and a proxy sets Host from it (RFC 9112
    # 3.2.2): the receiver sees the address. (https goes by CONNECT, with the name in SNI and
    # Host: tests/system/test_egress_tls.py.)
    assert sent.headers["Host"] == f"127.0.0.1:{receiver.port}"
    assert "Proxy-Authorization" not in sent.headers  # the proxy's, and it kept it
    Webhook(endpoint["secret"]).verify(sent.body, sent.headers)
    # What the proxy was asked for, and where it went, by its own log: the address only.
    assert forward_proxy.asked() == [f"POST http://127.0.0.1:{receiver.port}/via-proxy HTTP/1.1"]
    assert forward_proxy.connected_to() == [f"127.0.0.1:{receiver.port}"]
    assert not [line for line in forward_proxy.lines() if "localhost" in line]


async def test_a_name_that_now_resolves_to_a_refused_address_never_reaches_the_proxy(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    forward_proxy: ForwardProxy,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    """DNS rebinding through the proxy: the name passed the guard when saved, and resolves to
    a refused address when sent (here: the worker's allowlist no longer admits loopback). A
    proxy given the name would resolve it and connect; Herald refuses before asking it."""
    endpoint = await new_endpoint(client, tenant, url=f"http://localhost:{receiver.port}/rebind")
    literal = await new_endpoint(client, tenant, url=f"http://127.0.0.1:{receiver.port}/literal")
    by_name = (await post_deliveries(client, tenant, endpoint["id"], 1))[0]
    by_address = (await post_deliveries(client, tenant, literal["id"], 1))[0]
    async with pump(
        settings, engine, egress_proxy=SecretStr(forward_proxy.url), destination_allowlist=()
    ) as (
        running,
        _,
    ):
        running.start()
        await wait_state(engine, by_name, "dead")
        await wait_state(engine, by_address, "dead")

    [*_, named] = await attempts_of(engine, by_name)
    [*_, literal_attempt] = await attempts_of(engine, by_address)
    assert named["error"] == "'localhost' resolves to a non-public address"
    assert literal_attempt["outcome"] == "blocked"
    assert forward_proxy.asked() == [] and forward_proxy.connected_to() == []
    assert receiver.on("/rebind") == [] and receiver.on("/literal") == []


async def test_a_proxy_asking_for_credentials_is_not_held_against_the_receiver(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    forward_proxy: ForwardProxy,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    """Plain http goes to the proxy in absolute form, so the proxy's own answer comes back
    as the answer: a 407 is the proxy's, never the receiver's (the https case, where the
    proxy refuses the CONNECT, is tests/system/test_egress_tls.py)."""
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/never"))
    [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
    no_credentials = forward_proxy.url.replace(f"{USER}:{PASSWORD}@", "")
    async with pump(
        settings, engine, egress_proxy=SecretStr(no_credentials), breaker_failures=1
    ) as (running, _):
        running.start()

        async def tried() -> list[dict[str, Any]]:
            return await attempts_of(engine, delivery)

        [attempt, *_] = await eventually(tried, lambda found: len(found) >= 1)
    assert (attempt["outcome"], attempt["status_code"]) == ("retryable", None)
    assert attempt["error"] == "egress proxy: 407 Proxy Authentication Required"
    assert receiver.on("/never") == []
    shown = (await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)).json()
    assert (shown["circuit"], shown["consecutive_failures"]) == ("closed", 0)


async def test_an_oauth2_token_request_leaves_through_the_proxy_too(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    forward_proxy: ForwardProxy,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    async with running_authorization() as authorization:
        endpoint = await new_endpoint(
            client,
            tenant,
            url=authorization.url("/hook"),
            oauth2={
                "token_url": f"http://localhost:{authorization.port}/token",
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
            },
        )
        [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
        async with pump(settings, engine, egress_proxy=SecretStr(forward_proxy.url)) as (
            running,
            _,
        ):
            running.start()
            await wait_state(engine, delivery, "succeeded")
    assert forward_proxy.asked() == [
        f"POST http://127.0.0.1:{authorization.port}/token HTTP/1.1",
        f"POST http://127.0.0.1:{authorization.port}/hook HTTP/1.1",
    ]
    assert len(authorization.accepted) == 1


async def test_a_name_that_does_not_resolve_now_is_retried_not_killed(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    forward_proxy: ForwardProxy,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    """A lookup that fails (a DNS outage, a name gone) is a failure to try again, as it is
    without a proxy -- never the guard's refusal, which would end the delivery at once."""
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/gone"))
    async with engine.begin() as connection:  # the name was fine when saved; it is not now
        await connection.execute(
            text("UPDATE endpoints SET url = 'http://no-such-host.invalid/gone' WHERE id = :id"),
            {"id": endpoint["id"]},
        )
    [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
    async with pump(settings, engine, egress_proxy=SecretStr(forward_proxy.url)) as (running, _):
        running.start()

        async def tried() -> list[dict[str, Any]]:
            return await attempts_of(engine, delivery)

        [attempt, *_] = await eventually(tried, lambda found: len(found) >= 1)
    assert attempt["outcome"] == "retryable"
    assert "'no-such-host.invalid' does not resolve" in attempt["error"]
    assert forward_proxy.asked() == []
