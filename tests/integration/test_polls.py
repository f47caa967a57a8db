"""What a poll costs others and who may poll: each tenant's share of an API process's waiting
polls (one tenant's waits never refuse another's); a portal session polls its customer's
polling endpoints and no other customer's; a delivery a poll cannot build (its endpoint's
secret damaged) dies at once, nothing answered and nothing logged of the secret."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.db import create_sessionmaker
from app.core.scope import Scope
from app.engine.service.polls import PollRefused, Polls
from tests.fixtures.api import new_endpoint, new_tenant, portal_bearer
from tests.fixtures.deliveries import deliver
from tests.fixtures.waiting import eventually


async def polling_endpoint(
    client: httpx.AsyncClient, auth: dict[str, str], **fields: Any
) -> dict[str, Any]:
    return await new_endpoint(client, auth, url=None, delivery="poll", **fields)


async def test_a_tenant_waits_in_its_own_share_of_polls(
    client: httpx.AsyncClient, tenant: dict[str, str], settings: Settings, engine: AsyncEngine
) -> None:
    other = await new_tenant(client, "other")
    mine, theirs = await polling_endpoint(client, tenant), await polling_endpoint(client, other)
    two_each = settings.model_copy(update={"poll_waits_per_tenant": 2})
    polls = Polls(two_each, create_sessionmaker(engine), two_each.key_ring())
    tenant_id = await _tenant_of(engine, mine["id"])
    other_id = await _tenant_of(engine, theirs["id"])

    waiting = [
        asyncio.create_task(
            polls.poll(Scope(tenant_id), mine["id"], limit=1, wait=20, visibility=30)
        )
        for _ in range(2)
    ]
    await asyncio.sleep(0.2)
    assert not any(task.done() for task in waiting)
    # The tenant's share is taken: its third poll that finds nothing is refused, not queued...
    with pytest.raises(PollRefused):
        await polls.poll(Scope(tenant_id), mine["id"], limit=10, wait=20, visibility=30)
    # ...but one that finds deliveries answers them; and another tenant waits in its own share.
    theirs_waiting = asyncio.create_task(
        polls.poll(Scope(other_id), theirs["id"], limit=10, wait=20, visibility=30)
    )
    delivered = await deliver(client, other, theirs["id"], {"n": 1})
    assert [read.id for read in await theirs_waiting] == [delivered]

    mine_delivered = {await deliver(client, tenant, mine["id"], {"n": n}) for n in (2, 3)}
    answered = [[read.id for read in await task] for task in waiting]
    assert sorted(len(page) for page in answered) == [1, 1]  # one each, never both to one
    assert {page[0] for page in answered} == mine_delivered
    assert await polls.poll(Scope(tenant_id), mine["id"], limit=10, wait=0, visibility=30) == []


async def _tenant_of(engine: AsyncEngine, endpoint_id: str) -> str:
    async with engine.connect() as connection:
        found = await connection.execute(
            text("SELECT tenant_id FROM endpoints WHERE id = :id"), {"id": endpoint_id}
        )
        return str(found.scalar_one())


async def test_a_portal_session_polls_its_customers_endpoints_alone(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    for customer_id in ("acme", "globex"):
        await client.put(f"/v1/customers/{customer_id}", json={}, headers=tenant)
    mine = await polling_endpoint(client, tenant, customer_id="acme")
    theirs = await polling_endpoint(client, tenant, customer_id="globex")
    delivered = await deliver(client, tenant, mine["id"], {"n": 1})
    bearer = await portal_bearer(client, tenant, "acme", "poll_endpoints")
    # A read hides what it reads from the receiver's own polls: a read-only session may not.
    reader = await portal_bearer(client, tenant, "acme")
    refused = await client.get(f"/v1/endpoints/{mine['id']}/poll", headers=reader)
    assert refused.status_code == 403 and "poll" in refused.json()["detail"]

    read = await client.get(f"/v1/endpoints/{mine['id']}/poll", headers=bearer)
    assert read.status_code == 200, read.text
    [item] = read.json()["data"]
    assert item["id"] == delivered
    acked = await client.post(
        f"/v1/endpoints/{mine['id']}/poll/ack",
        json={"receipts": [item["receipt"]]},
        headers=bearer,
    )
    assert acked.json() == {"acknowledged": [delivered], "expired": []}
    for method, path, body in (
        ("GET", f"/v1/endpoints/{theirs['id']}/poll", None),
        ("POST", f"/v1/endpoints/{theirs['id']}/poll/ack", {"receipts": [item["receipt"]]}),
    ):
        refused = await client.request(method, path, json=body, headers=bearer)
        assert refused.status_code == 404, refused.text


async def test_a_delivery_a_poll_cannot_build_dies_at_once(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    broken, fine = await polling_endpoint(client, tenant), await polling_endpoint(client, tenant)
    damaged = await deliver(client, tenant, broken["id"], {"n": 1})
    kept = await deliver(client, tenant, fine["id"], {"n": 2})
    async with engine.begin() as connection:
        await connection.execute(
            text("UPDATE endpoints SET secret_sealed = :value WHERE id = :id"),
            {"value": b"whsec_damaged", "id": broken["id"]},
        )

    read = await client.get(f"/v1/endpoints/{broken['id']}/poll", headers=tenant)
    assert read.status_code == 200 and read.json()["data"] == []
    dead = (await client.get(f"/v1/deliveries/{damaged}", headers=tenant)).json()
    assert dead["state"] == "dead" and "signing secret" in dead["dead_reason"]
    assert "whsec_damaged" not in dead["dead_reason"]
    # The other endpoint's reads are its own.
    [item] = (await client.get(f"/v1/endpoints/{fine['id']}/poll", headers=tenant)).json()["data"]
    assert item["id"] == kept


async def test_the_portal_shows_a_polling_endpoint_without_a_url(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    endpoint = await polling_endpoint(client, tenant, customer_id="acme")
    manager = await portal_bearer(client, tenant, "acme", "manage_endpoints")

    listed = await client.get("/portal/api/endpoints", headers=manager)
    assert "polled by your receiver" in listed.text and "None" not in listed.text
    form = await client.get(f"/portal/api/endpoints/{endpoint['id']}/edit", headers=manager)
    assert "Polled by your receiver" in form.text and 'name="url"' not in form.text
    saved = await client.post(
        f"/portal/api/endpoints/{endpoint['id']}",
        data={"description": "my laptop"},
        headers=manager,
    )
    assert saved.status_code == 200, saved.text
    now = (await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)).json()
    assert now["description"] == "my laptop" and now["url"] is None


async def test_a_customer_waits_in_its_share_of_its_tenants_polls(
    client: httpx.AsyncClient, tenant: dict[str, str], settings: Settings, engine: AsyncEngine
) -> None:
    endpoint = await polling_endpoint(client, tenant)
    tenant_id = await _tenant_of(engine, endpoint["id"])
    eight = settings.model_copy(update={"poll_waits_per_tenant": 8})
    polls = Polls(eight, create_sessionmaker(engine), eight.key_ring())
    acme = Scope(tenant_id, "acme")

    def waiting(scope: Scope) -> asyncio.Task[list[Any]]:
        return asyncio.create_task(
            polls.poll(scope, endpoint["id"], limit=1, wait=20, visibility=30)
        )

    # A customer's share is a quarter of its tenant's: two of eight.
    held = [waiting(acme), waiting(acme)]
    await asyncio.sleep(0.2)
    with pytest.raises(PollRefused):
        await polls.poll(acme, endpoint["id"], limit=1, wait=20, visibility=30)
    # Another customer, and the tenant itself, still wait in theirs.
    held += [waiting(Scope(tenant_id, "globex")), waiting(Scope(tenant_id))]
    await asyncio.sleep(0.2)
    assert not any(task.done() for task in held)
    for n in range(4):
        await deliver(client, tenant, endpoint["id"], {"n": n})
    pages = [await task for task in held]
    assert sorted(len(page) for page in pages) == [1, 1, 1, 1]


async def test_a_page_holds_its_bytes_and_gives_back_the_rest_unread(
    client: httpx.AsyncClient, tenant: dict[str, str], settings: Settings, engine: AsyncEngine
) -> None:
    endpoint = await polling_endpoint(client, tenant)
    tenant_id = await _tenant_of(engine, endpoint["id"])
    ids = [await deliver(client, tenant, endpoint["id"], {"n": "x" * 100}) for _ in range(5)]
    # A page of at most 250 bytes of bodies past its first: three of these.
    polls = Polls(settings, create_sessionmaker(engine), settings.key_ring(), page_bytes=250)

    read = await polls.poll(Scope(tenant_id), endpoint["id"], limit=5, wait=0, visibility=30)
    assert [item.id for item in read] == ids[:3]
    for delivery_id in ids[3:]:  # given back: not read, not counted
        rest = (await client.get(f"/v1/deliveries/{delivery_id}", headers=tenant)).json()
        assert (rest["state"], rest["attempt_count"]) == ("pending", 0)
    rest = await polls.poll(Scope(tenant_id), endpoint["id"], limit=5, wait=0, visibility=30)
    assert [item.id for item in rest] == ids[3:]


async def test_a_current_receipt_acknowledges_beside_an_expired_one(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    endpoint = await polling_endpoint(client, tenant)
    delivered = await deliver(client, tenant, endpoint["id"], {"n": 1})
    poll = f"/v1/endpoints/{endpoint['id']}/poll"
    [first] = (await client.get(poll, params={"visibility": 1}, headers=tenant)).json()["data"]

    async def read_again() -> list[dict[str, Any]]:
        answer = await client.get(poll, params={"visibility": 60}, headers=tenant)
        data: list[dict[str, Any]] = answer.json()["data"]
        return data

    [second] = await eventually(read_again, bool, timeout=20)
    acked = await client.post(
        f"{poll}/ack", json={"receipts": [second["receipt"], first["receipt"]]}, headers=tenant
    )
    assert acked.json() == {"acknowledged": [delivered], "expired": []}
