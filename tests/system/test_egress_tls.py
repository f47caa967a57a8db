"""https through the egress proxy, by a real `herald worker` (trusting the test's own CA through
SSL_CERT_FILE): the proxy is asked to CONNECT to the address the worker vetted, never the name,
while the receiver's TLS handshake still carries the name (SNI, checked against its
certificate) and so does Host; a proxy that refuses the worker is not the receiver's failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks.webhooks import Webhook

from tests.fixtures.api import new_endpoint, post_deliveries
from tests.fixtures.forward_proxy import ForwardProxy, localhost_addresses
from tests.fixtures.processes import running_worker
from tests.fixtures.receiver import running_receiver
from tests.fixtures.stack import Stack
from tests.fixtures.tls import Authority, server_context
from tests.fixtures.waiting import attempts_of, eventually, wait_state


@pytest.fixture
def authority(tmp_path: Path) -> Authority:
    return Authority(tmp_path / "tls")


async def test_https_goes_by_connect_to_the_vetted_address_with_the_name_in_sni_and_host(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    stack: Stack,
    engine: AsyncEngine,
    authority: Authority,
    forward_proxy: ForwardProxy,
    tmp_path: Path,
) -> None:
    assert localhost_addresses() == {"127.0.0.1"}, "this test names the receiver `localhost`"
    server_names: list[str | None] = []
    async with running_receiver(server_context(authority, server_names)) as receiver:
        endpoint = await new_endpoint(
            client, tenant, url=f"https://localhost:{receiver.port}/secure"
        )
        [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
        with running_worker(
            stack,
            tmp_path / "worker.log",
            HERALD_EGRESS_PROXY=forward_proxy.url,
            SSL_CERT_FILE=str(authority.ca_file),
        ):
            await wait_state(engine, delivery, "succeeded")
        [sent] = receiver.on("/secure")

    assert server_names == ["localhost"]  # the name, in the handshake: the certificate matched
    assert sent.headers["Host"] == f"localhost:{receiver.port}"
    assert "Proxy-Authorization" not in sent.headers  # sent on the CONNECT, never inside
    Webhook(endpoint["secret"]).verify(sent.body, sent.headers)
    assert forward_proxy.asked() == [f"CONNECT 127.0.0.1:{receiver.port} HTTP/1.1"]
    assert forward_proxy.connected_to() == [f"127.0.0.1:{receiver.port}"]
    assert not [line for line in forward_proxy.lines() if "localhost" in line]


async def test_a_proxy_that_refuses_the_worker_is_retried_and_not_held_against_the_receiver(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    stack: Stack,
    engine: AsyncEngine,
    authority: Authority,
    forward_proxy: ForwardProxy,
    tmp_path: Path,
) -> None:
    server_names: list[str | None] = []
    async with running_receiver(server_context(authority, server_names)) as receiver:
        endpoint = await new_endpoint(
            client, tenant, url=f"https://localhost:{receiver.port}/refused"
        )
        [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
        with running_worker(
            stack,
            tmp_path / "worker.log",
            HERALD_EGRESS_PROXY=forward_proxy.url.replace("proxy-pass-7", "wrong-pass"),
            HERALD_BREAKER_FAILURES="1",
            SSL_CERT_FILE=str(authority.ca_file),
        ) as worker:

            async def tried() -> list[dict[str, Any]]:
                return await attempts_of(engine, delivery)

            [attempt, *_] = await eventually(tried, lambda found: len(found) >= 1, timeout=30)
        on_receiver = receiver.on("/refused")

    assert attempt["outcome"] == "retryable" and attempt["status_code"] is None
    assert attempt["error"] == "before sending: egress proxy: refused the CONNECT (HTTP 401)"
    assert "wrong-pass" not in worker.output()
    assert "127.0.0.1" not in attempt["error"]  # where the proxy is is the operator's to know
    assert on_receiver == [] and server_names == []
    shown = (await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)).json()
    assert (shown["circuit"], shown["consecutive_failures"]) == ("closed", 0)
