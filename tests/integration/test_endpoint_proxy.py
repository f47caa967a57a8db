"""An endpoint's own egress proxy (`egress_proxy`), in place of the operator's, through Debian's
tinyproxy: attempts and the endpoint's token requests go through it asking for the address
Herald vetted; its credentials are sealed and never shown; it passes the SSRF guard at save
and on every connection; and, being the tenant's, its failures count against the endpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks.webhooks import Webhook

from app.core.config import Settings
from tests.fixtures.api import new_endpoint, post_deliveries
from tests.fixtures.engine import pump
from tests.fixtures.forward_proxy import PASSWORD, ForwardProxy
from tests.fixtures.receiver import Receiver, running_receiver
from tests.fixtures.tls import Authority, server_context
from tests.fixtures.waiting import attempts_of, eventually, wait_state


async def test_attempts_go_through_the_endpoints_proxy_whose_credentials_are_never_shown(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    forward_proxy: ForwardProxy,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    endpoint = await new_endpoint(
        client,
        tenant,
        url=receiver.url("/own-proxy"),
        egress_proxy={"url": forward_proxy.url},
    )
    assert endpoint["egress_proxy"] == {
        "url": f"http://127.0.0.1:{forward_proxy.port}",
        "credentials": True,
    }
    shown = await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)
    assert PASSWORD not in shown.text and PASSWORD not in str(endpoint)
    [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
    async with pump(settings, engine) as (running, _):  # no HERALD_EGRESS_PROXY
        running.start()
        await wait_state(engine, delivery, "succeeded")
    [sent] = receiver.on("/own-proxy")
    Webhook(endpoint["secret"]).verify(sent.body, sent.headers)
    assert "Proxy-Authorization" not in sent.headers
    assert forward_proxy.asked() == [f"POST http://127.0.0.1:{receiver.port}/own-proxy HTTP/1.1"]
    tested = await client.post(f"/v1/endpoints/{endpoint['id']}/test", headers=tenant)
    steps = {step["step"]: step for step in tested.json()["steps"]}
    assert steps["proxy"] == {
        "step": "proxy",
        "outcome": "ok",
        "detail": f"through the endpoint's egress proxy http://127.0.0.1:{forward_proxy.port}",
    }
    assert tested.json()["delivered"] and len(forward_proxy.asked()) == 2

    # It replaces the operator's proxy for this endpoint: a broken operator's proxy is not used.
    [second] = await post_deliveries(client, tenant, endpoint["id"], 1)
    async with pump(settings, engine, egress_proxy=SecretStr("http://127.0.0.1:9")) as (
        running,
        _,
    ):
        running.start()
        await wait_state(engine, second, "succeeded")
    assert len(forward_proxy.asked()) == 3


async def test_a_proxy_refused_by_the_ssrf_guard_is_refused_at_save_and_at_send(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    forward_proxy: ForwardProxy,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    refused = await client.post(
        "/v1/endpoints",
        json={
            "url": receiver.url("/x"),
            "egress_proxy": {"url": "http://u:metadata-pass@169.254.169.254:3128"},
        },
        headers=tenant,
    )
    assert refused.status_code in (400, 422), refused.text
    assert "egress_proxy.url" in refused.text and "metadata-pass" not in refused.text
    not_http = await client.post(
        "/v1/endpoints",
        json={"url": receiver.url("/x"), "egress_proxy": {"url": "https://127.0.0.1:3128"}},
        headers=tenant,
    )
    assert not_http.status_code == 422 and "an egress proxy is http://" in not_http.text

    # Saved while loopback was allowed; sent when it no longer is: refused before connecting.
    endpoint = await new_endpoint(
        client, tenant, url=receiver.url("/guarded"), egress_proxy={"url": forward_proxy.url}
    )
    [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
    async with pump(settings, engine, destination_allowlist=()) as (running, _):
        running.start()
        await wait_state(engine, delivery, "dead")
    [attempt] = await attempts_of(engine, delivery)
    assert attempt["outcome"] == "blocked"
    assert "egress proxy" in attempt["error"] and PASSWORD not in attempt["error"]
    assert forward_proxy.asked() == [] and receiver.on("/guarded") == []


async def test_the_endpoints_proxy_failing_counts_against_the_endpoint(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    forward_proxy: ForwardProxy,
    settings: Settings,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    """https through the proxy (CONNECT) to a receiver with its own CA (`tls.ca_bundle`): the
    proxy refuses the credentials, and the endpoint's breaker counts it."""
    authority = Authority(tmp_path / "ca")
    async with running_receiver(server_context(authority, [])) as receiver:
        wrong = forward_proxy.url.replace(PASSWORD, "wrong-pass")
        endpoint = await new_endpoint(
            client,
            tenant,
            url=f"https://127.0.0.1:{receiver.port}/refused",
            egress_proxy={"url": wrong},
            tls={"ca_bundle": authority.ca_pem()},
        )
        [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
        async with pump(settings, engine, breaker_failures=1) as (running, _):
            running.start()

            async def tried() -> list[dict[str, Any]]:
                return await attempts_of(engine, delivery)

            [attempt, *_] = await eventually(tried, lambda found: len(found) >= 1)
        on_receiver = receiver.on("/refused")
    assert (attempt["outcome"], attempt["status_code"]) == ("retryable", None)
    assert attempt["error"] == (
        "before sending: the endpoint's egress proxy: refused the CONNECT (HTTP 401)"
    )
    assert "wrong-pass" not in attempt["error"]
    shown = (await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)).json()
    assert shown["consecutive_failures"] >= 1 and shown["circuit"] == "open"
    assert on_receiver == []


async def test_a_proxy_named_like_the_operators_gets_no_trust_from_the_name(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    forward_proxy: ForwardProxy,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    """The operator's proxy is `localhost:<its port>`, reached wherever it is; a tenant names
    `localhost:<another port>` -- an internal service -- as its endpoint's proxy. The worker
    allows no loopback destination: the tenant's proxy is vetted by its address, and refused,
    where trusting the operator's proxy by name would have let it through to that port."""
    internal = receiver  # a service on the operator's host, at another port
    endpoint = await new_endpoint(
        client,
        tenant,
        url="http://93.184.215.14/hook",  # public: never reached, the proxy is refused first
        egress_proxy={"url": f"http://localhost:{internal.port}"},
    )
    [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
    operator = forward_proxy.url.replace("127.0.0.1", "localhost")
    async with pump(
        settings, engine, egress_proxy=SecretStr(operator), destination_allowlist=()
    ) as (running, _):
        running.start()
        await wait_state(engine, delivery, "dead")
    [attempt] = await attempts_of(engine, delivery)
    assert attempt["outcome"] == "blocked"
    assert attempt["error"].startswith("egress proxy: 'localhost' resolves to a non-public")
    assert internal.requests == [] and forward_proxy.asked() == []
