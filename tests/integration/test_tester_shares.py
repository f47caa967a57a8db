"""The API's way out to receivers -- endpoint tests, portal test events, webhook handshakes --
is shared by every tenant, and each tenant has a share of it: one that holds all of its own
with a receiver that never answers is refused in words for more, while another tenant's test
and handshake go through. Customers cost a tenant nothing to make, so they share a share of
their own: the tenant's own tests are never held up by its customers'."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from app.engine.service.endpoint_tester import IN_FLIGHT_ALL_CUSTOMERS
from tests.fixtures.api import new_endpoint, new_tenant, portal_bearer
from tests.fixtures.receiver import Receiver, Reply

CUSTOMERS = 3
TESTS_EACH = 7  # 21 held tests: more than the connection pool the tests shared before


async def test_a_tenant_holding_its_tests_on_a_silent_receiver_costs_another_tenant_nothing(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    released = asyncio.Event()
    receiver.script("/silent", *[Reply(hold=released)] * (CUSTOMERS * TESTS_EACH))
    attacker = tenant
    sessions = []
    for n in range(CUSTOMERS):
        customer = f"cus-{n}"
        await client.put(f"/v1/customers/{customer}", json={}, headers=attacker)
        endpoint = await new_endpoint(
            client, attacker, url=receiver.url("/silent"), customer_id=customer
        )
        manager = await portal_bearer(client, attacker, customer, "manage_endpoints")
        sessions.append((endpoint, manager))

    async def portal_test(endpoint: dict[str, Any], manager: dict[str, str]) -> httpx.Response:
        path = f"/portal/api/endpoints/{endpoint['id']}/test"
        return await client.post(path, headers=manager)

    attack = [
        asyncio.create_task(portal_test(endpoint, manager))
        for endpoint, manager in sessions
        for _ in range(TESTS_EACH)
    ]
    held = await receiver.wait_for("/silent", IN_FLIGHT_ALL_CUSTOMERS)
    assert len(held) == IN_FLIGHT_ALL_CUSTOMERS

    # The attacker's own key, while its customers' tests all wait: its share is its own.
    own = await new_endpoint(client, attacker, url=receiver.url("/own"))
    tested_own = await client.post(f"/v1/endpoints/{own['id']}/test", headers=attacker)
    assert tested_own.status_code == 200, tested_own.text
    assert tested_own.json()["delivered"] is True

    # The victim, while the attacker's tests are all still waiting on the silent receiver.
    victim = await new_tenant(client, "victim")
    endpoint = await new_endpoint(client, victim, url=receiver.url("/answers"))
    tested = await client.post(f"/v1/endpoints/{endpoint['id']}/test", headers=victim)
    assert tested.status_code == 200, tested.text
    assert tested.json()["delivered"] is True
    consented = await client.post(
        "/v1/endpoints",
        json={"url": receiver.url("/consents"), "webhook_handshake": True},
        headers=victim,
    )
    assert consented.status_code in (201, 422), consented.text
    assert "no answer" not in consented.text  # asked and answered, whatever it said
    assert not any(task.done() and task.result().status_code == 200 for task in attack)

    released.set()
    answers = await asyncio.gather(*attack)
    refused = [a for a in answers if "wait on receivers at once" in a.text]
    assert len(refused) == CUSTOMERS * TESTS_EACH - IN_FLIGHT_ALL_CUSTOMERS
    assert all(a.status_code == 429 and a.headers["Retry-After"] for a in refused)
    assert len(receiver.on("/silent")) == IN_FLIGHT_ALL_CUSTOMERS


async def _a_minute_with_room() -> None:
    """The limits count per clock minute: start a test's sends where a minute has 30 s left,
    so that none of them is counted in the next one."""
    left = 60 - time.time() % 60
    if left < 30:
        await asyncio.sleep(left + 0.1)


async def test_a_tenants_customers_together_are_held_to_the_tenants_minute(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    await _a_minute_with_room()
    answers = []
    for n in range(8):  # 8 customers x 10 a minute each would be 80
        customer = f"cus-{n}"
        await client.put(f"/v1/customers/{customer}", json={}, headers=tenant)
        endpoint = await new_endpoint(
            client, tenant, url=receiver.url("/quick"), customer_id=customer
        )
        manager = await portal_bearer(client, tenant, customer, "manage_endpoints")
        for _ in range(10):
            path = f"/portal/api/endpoints/{endpoint['id']}/test"
            answers.append(await client.post(path, headers=manager))
    refused = [a for a in answers if a.status_code == 429]
    assert len(answers) - len(refused) == 60
    assert all("from all of a tenant's customers together" in a.text for a in refused)


async def test_a_customer_refused_at_its_own_limit_leaves_the_tenants_minute_to_the_others(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    """A refused test counts against nothing: one customer asking again and again past its
    own 10 a minute must not use up the 60 its tenant's customers share."""
    managed = []
    for n in range(6):
        customer = f"cus-{n}"
        await client.put(f"/v1/customers/{customer}", json={}, headers=tenant)
        endpoint = await new_endpoint(
            client, tenant, url=receiver.url("/quick"), customer_id=customer
        )
        managed.append(
            (endpoint, await portal_bearer(client, tenant, customer, "manage_endpoints"))
        )

    async def portal_test(n: int) -> httpx.Response:
        endpoint, manager = managed[n]
        return await client.post(f"/portal/api/endpoints/{endpoint['id']}/test", headers=manager)

    await _a_minute_with_room()
    greedy = [await portal_test(0) for _ in range(60)]
    assert [a.status_code for a in greedy] == [200] * 10 + [429] * 50
    assert all("per customer" in a.text for a in greedy[10:])
    others = [await portal_test(n) for n in range(1, 6) for _ in range(10)]
    assert [a.status_code for a in others] == [200] * 50
    past = await portal_test(5)
    assert past.status_code == 429
