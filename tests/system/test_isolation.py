"""No tenant can cost another anything: a real `herald api` and worker, a quiet tenant posting
one intent at a time while another, held by the operator to small limits, attacks every
shared resource at once -- batches past its accept rate, deliveries past its delivery rate,
events to every endpoint of a customer through regex filters, more endpoints than a customer
may have, a costly pattern, tests held on a silent receiver, half-open connections from an
address of its own. Counts and states only: every quiet request answered and delivered,
nothing answered 5xx, every refusal in words. (The figures beside it: bench/isolation.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.api import new_endpoint, new_tenant
from tests.fixtures.processes import ApiProcess, running_worker, start_api, wait_healthy
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.stack import ADMIN, Stack
from tests.fixtures.waiting import eventually

QUIET_INTENTS = 30
FILTER = 'payload.t.matches("(a|b)*a(a|b){20}c")'  # as costly a pattern as a filter may hold
TOO_COSTLY = 'payload.t.matches("[\\\\p{L}\\\\p{N}]{60}")'
LIMITS = {
    "accept_rate": 50.0,
    "delivery_rate": 2.0,
    "max_endpoints_per_customer": 3,
    "max_fanout": 3,
}


@pytest.fixture
async def api(stack: Stack, tmp_path: Path) -> AsyncIterator[ApiProcess]:
    started = start_api(stack, tmp_path, HERALD_API_MAX_CONNECTIONS_PER_CLIENT="20")
    try:
        await wait_healthy(started)
        yield started
    finally:
        started.stop()


async def _attacker(http: httpx.AsyncClient, receiver: Receiver) -> dict[str, Any]:
    made = await http.post("/v1/tenants", json={"name": "attacker"}, headers=ADMIN)
    tenant = {"Authorization": f"Bearer {made.json()['api_key']}"}
    limited = await http.patch(
        f"/v1/tenants/{made.json()['id']}/limits", json=LIMITS, headers=ADMIN
    )
    assert limited.status_code == 200, limited.text
    await http.put("/v1/customers/victimised", json={}, headers=tenant)
    for _ in range(3):
        spec = {"url": receiver.url("/fanned"), "customer_id": "victimised", "filter": FILTER}
        await new_endpoint(http, tenant, **spec)
    return {
        "tenant": tenant,
        "own": await new_endpoint(http, tenant, url=receiver.url("/attacker")),
        "silent": await new_endpoint(http, tenant, url=receiver.url("/silent")),
    }


async def _half_open(port: int, held: list[socket.socket]) -> None:
    """Forty connections from 127.0.0.2 that send part of a request line and nothing more."""
    for _ in range(40):
        sock = socket.socket()
        sock.setblocking(False)
        sock.bind(("127.0.0.2", 0))
        with contextlib.suppress(BlockingIOError):
            sock.connect(("127.0.0.1", port))
        held.append(sock)
        await asyncio.sleep(0.01)
        with contextlib.suppress(OSError):
            sock.send(b"GET /v1/deliver")


async def test_a_tenant_attacking_every_shared_resource_costs_a_quiet_tenant_nothing(
    api: ApiProcess, stack: Stack, receiver: Receiver, tmp_path: Path
) -> None:
    released = asyncio.Event()
    receiver.script("/silent", *[Reply(hold=released)] * 10)
    answers: list[httpx.Response] = []
    held: list[socket.socket] = []
    async with httpx.AsyncClient(base_url=api.base_url, timeout=30) as http:
        quiet = await new_tenant(http, "quiet")
        quiet_endpoint = await new_endpoint(http, quiet, url=receiver.url("/quiet"))
        attacker = await _attacker(http, receiver)
        tenant = attacker["tenant"]

        async def post(path: str, body: Any = None) -> None:
            answers.append(await http.post(path, json=body, headers=tenant))

        batch = [
            {"endpoint_id": attacker["own"]["id"], "event_type": "a.b", "payload": {"n": n}}
            for n in range(100)
        ]
        event = {
            "event_type": "a.b",
            "customer_id": "victimised",
            "payload": {"t": "a" + "b" * 20 + "c"},
        }

        async def events_then_batches() -> None:
            for _ in range(10):  # 30 deliveries: within the accept rate's second of burst
                await post("/v1/events", event)
            for _ in range(5):  # the first taken, the rest past the rate
                await post("/v1/deliveries/batch", {"items": batch})

        attacks = [
            events_then_batches(),
            *(post(f"/v1/endpoints/{attacker['silent']['id']}/test") for _ in range(6)),
            post("/v1/endpoints", {"url": receiver.url("/x"), "customer_id": "victimised"}),
            post("/v1/endpoints", {"url": receiver.url("/x"), "filter": TOO_COSTLY}),
            _half_open(int(api.base_url.rsplit(":", 1)[1]), held),
        ]
        attacking = asyncio.gather(*attacks)
        with running_worker(stack, tmp_path / "worker.log"):
            body = {"endpoint_id": quiet_endpoint["id"], "event_type": "a.b", "payload": {}}
            accepted = [
                await http.post("/v1/deliveries", json=body, headers=quiet)
                for _ in range(QUIET_INTENTS)
            ]
            assert [a.status_code for a in accepted] == [202] * QUIET_INTENTS
            await receiver.wait_for("/quiet", QUIET_INTENTS)
            released.set()
            await attacking
            # The quiet tenant's all arrived while the attacker's batch still waits its rate.
            [batch_taken] = [
                a for a in answers if a.url.path.endswith("/batch") and a.status_code == 200
            ]
            last = batch_taken.json()["items"][-1]["delivery"]["id"]
            waiting = await eventually(
                lambda: http.get(f"/v1/deliveries/{last}", headers=tenant),
                lambda status: "its tenant at its delivery rate" in status.text,
            )
            assert waiting.json()["state"] != "succeeded"
    for sock in held:
        sock.close()

    assert len(receiver.on("/quiet")) == QUIET_INTENTS
    assert all(a.status_code < 500 for a in answers), [a.text for a in answers]
    refused = [a for a in answers if a.status_code >= 400]
    statuses = {a.status_code for a in refused}
    assert statuses == {409, 422, 429}, [(a.status_code, a.text) for a in refused]
    for answer in refused:
        assert answer.headers["content-type"] == "application/problem+json"
        assert len(answer.json()["detail"]) > 20, answer.text
    said = " ".join(a.json()["detail"] for a in refused)
    assert "accept_rate" in said and "max_endpoints_per_customer" in said
    fanned = [a for a in answers if a.url.path == "/v1/events" and a.status_code == 202]
    assert len(fanned) == 10 and all(len(a.json()["deliveries"]) == 3 for a in fanned)
    assert "RE2" in said or "pattern" in said
    assert len(receiver.on("/silent")) <= 2  # its tests held at its share, the rest refused
