"""A tenant's accept rate, set by the operator and counted across API processes in Redis:
past it, 429 with Retry-After and nothing stored; another tenant accepts as before; and the
intent refused is accepted once the tenant's time has come (the same key included)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.flow.service.accept_rates import accepts_key
from app.main import create_app
from tests.fixtures.api import new_endpoint, new_tenant
from tests.fixtures.stack import ADMIN, client_for
from tests.fixtures.waiting import count_rows

# One intent every 100 s: the first is let in, every other waits -- however slow the machine.
SLOW = 0.01


async def _limited(client: httpx.AsyncClient, tenant: dict[str, str], rate: float) -> str:
    tenant_id = (await client.get("/v1/limits", headers=tenant)).json()["tenant_id"]
    answer = await client.patch(
        f"/v1/tenants/{tenant_id}/limits", json={"accept_rate": rate}, headers=ADMIN
    )
    assert answer.status_code == 200 and answer.json()["accept_rate"] == rate, answer.text
    return str(tenant_id)


def _intent(endpoint: dict[str, Any], n: int) -> dict[str, Any]:
    return {"endpoint_id": endpoint["id"], "event_type": "a.b", "payload": {"n": n}}


async def test_past_its_accept_rate_a_tenant_is_refused_and_nothing_is_stored(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    endpoint = await new_endpoint(client, tenant, event_types=["a.b"])
    await _limited(client, tenant, SLOW)
    victim = await new_tenant(client, "victim")
    theirs = await new_endpoint(client, victim)

    answers = await asyncio.gather(
        *[
            client.post("/v1/deliveries", json=_intent(endpoint, n), headers=tenant)
            for n in range(8)
        ],
        client.post("/v1/deliveries/batch", json={"items": [_intent(endpoint, 9)]}, headers=tenant),
        client.post("/v1/events", json={"event_type": "a.b", "payload": {}}, headers=tenant),
    )
    accepted = [a for a in answers if a.status_code in (200, 202)]
    refused = [a for a in answers if a.status_code == 429]
    assert len(accepted) == 1 and len(refused) == len(answers) - 1
    for answer in refused:
        assert answer.headers["content-type"] == "application/problem+json"
        assert int(answer.headers["Retry-After"]) > 1
        assert "0.01 intents accepted a second (accept_rate" in answer.json()["detail"]
    assert await count_rows(engine, "deliveries") == 1

    # Another tenant is not held to it.
    for n in range(5):
        mine = await client.post("/v1/deliveries", json=_intent(theirs, n), headers=victim)
        assert mine.status_code == 202, mine.text


async def test_a_refused_keyed_intent_is_accepted_when_the_tenants_time_comes(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine, redis: Any
) -> None:
    endpoint = await new_endpoint(client, tenant)
    tenant_id = await _limited(client, tenant, SLOW)
    keyed = {**tenant, "Idempotency-Key": "order-42"}
    first = await client.post("/v1/deliveries", json=_intent(endpoint, 1), headers=tenant)
    assert first.status_code == 202
    refused = await client.post("/v1/deliveries", json=_intent(endpoint, 2), headers=keyed)
    assert refused.status_code == 429
    # Its time come (the count forgotten, as 100 s would): the same key, the same intent.
    await redis.delete(accepts_key(tenant_id))
    again = await client.post("/v1/deliveries", json=_intent(endpoint, 2), headers=keyed)
    assert again.status_code == 202, again.text
    assert await count_rows(engine, "deliveries") == 2
    assert await count_rows(engine, "idempotency_keys") == 1


async def test_without_redis_a_tenants_accepts_go_through_as_every_accept_does(
    client: httpx.AsyncClient, tenant: dict[str, str], settings: Settings, tmp_path: Path
) -> None:
    """Redis is a pressure buffer, never the truth: when the count cannot be asked, a limited
    tenant's accepts are let in (PostgreSQL still takes them) rather than refused or failed."""
    endpoint = await new_endpoint(client, tenant)
    await _limited(client, tenant, SLOW)
    app = create_app(settings.model_copy(update={"redis_url": f"unix://{tmp_path}/none.sock"}))
    async with app.router.lifespan_context(app), client_for(app) as no_redis:
        answers = [
            await no_redis.post("/v1/deliveries", json=_intent(endpoint, n), headers=tenant)
            for n in range(3)
        ]
    assert [a.status_code for a in answers] == [202, 202, 202], answers[0].text
    # And with Redis back, the same tenant is held to its rate again.
    held = [
        await client.post("/v1/deliveries", json=_intent(endpoint, n), headers=tenant)
        for n in range(2)
    ]
    assert [a.status_code for a in held] == [202, 429]
