"""POST /v1/deliveries/batch: one transaction, per-item idempotency keys, per-item errors."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support import count_rows, new_endpoint, new_tenant

PROBLEM_TYPES = "https://herald.dev/problems/"


def item(endpoint_id: str, n: int, **extra: Any) -> dict[str, Any]:
    return {"endpoint_id": endpoint_id, "event_type": "batch.test", "payload": {"n": n}, **extra}


async def test_a_thousand_intents_in_one_request(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any], engine: AsyncEngine
) -> None:
    items = [item(endpoint["id"], n) for n in range(1000)]
    response = await client.post("/v1/deliveries/batch", json={"items": items}, headers=tenant)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["accepted"], body["replayed"], body["failed"]) == (1000, 0, 0)
    assert [r["index"] for r in body["items"]] == list(range(1000))
    ids = [r["delivery"]["id"] for r in body["items"]]
    assert len(set(ids)) == 1000
    assert await count_rows(engine, "deliveries") == 1000
    assert await count_rows(engine, "events") == 1000
    assert await count_rows(engine, "outbox") == 1000
    # Each item's delivery carries that item's payload.
    fetched = await client.get(f"/v1/deliveries/{ids[417]}", headers=tenant)
    assert fetched.json()["event_type"] == "batch.test"


async def test_bad_items_fail_alone(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any], engine: AsyncEngine
) -> None:
    disabled = await new_endpoint(client, tenant, enabled=False)
    items = [
        item(endpoint["id"], 0),
        item("ep_01J00000000000000000000000", 1),  # unknown endpoint
        item(disabled["id"], 2),  # disabled endpoint
        {"endpoint_id": endpoint["id"], "payload": {}},  # no event_type
        item(endpoint["id"], 4, payload={"big": "x" * 300_000}),  # payload too large
        item(endpoint["id"], 5, surprise=True),  # unknown field
        item(endpoint["id"], 6),
    ]
    response = await client.post("/v1/deliveries/batch", json={"items": items}, headers=tenant)
    results = response.json()["items"]
    assert [r["status"] for r in results] == [202, 404, 409, 422, 413, 422, 202]
    for failed in results[1:6]:
        assert failed["delivery"] is None
        assert failed["error"]["type"].startswith(PROBLEM_TYPES) and failed["error"]["detail"]
    assert await count_rows(engine, "deliveries") == 2 and await count_rows(engine, "events") == 2


async def test_per_item_keys_replay_conflict_and_stay_per_tenant(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any], engine: AsyncEngine
) -> None:
    first = await client.post(
        "/v1/deliveries/batch",
        json={"items": [item(endpoint["id"], 0, idempotency_key="k-0"), item(endpoint["id"], 1)]},
        headers=tenant,
    )
    original = first.json()["items"][0]["delivery"]["id"]
    again = await client.post(
        "/v1/deliveries/batch",
        json={
            "items": [
                item(endpoint["id"], 0, idempotency_key="k-0"),  # same intent: replay
                item(endpoint["id"], 9, idempotency_key="k-0b"),
                item(endpoint["id"], 99, idempotency_key="k-0b"),  # twice in one batch
            ]
        },
        headers=tenant,
    )
    results = again.json()["items"]
    assert results[0]["status"] == 200 and results[0]["delivery"]["id"] == original
    assert results[1]["status"] == 202
    assert results[2]["status"] == 422 and "twice" in results[2]["error"]["detail"]
    changed = await client.post(
        "/v1/deliveries/batch",
        json={"items": [item(endpoint["id"], 5, idempotency_key="k-0")]},
        headers=tenant,
    )
    assert changed.json()["items"][0]["status"] == 422
    # A batch key and the single route's header share one key space.
    single = await client.post(
        "/v1/deliveries",
        json=item(endpoint["id"], 0),
        headers={**tenant, "Idempotency-Key": "k-0"},
    )
    assert single.status_code == 200 and single.json()["id"] == original
    other = await new_tenant(client, "batch-other")
    theirs = await new_endpoint(client, other)
    elsewhere = await client.post(
        "/v1/deliveries/batch",
        json={"items": [item(theirs["id"], 0, idempotency_key="k-0")]},
        headers=other,
    )
    assert elsewhere.json()["items"][0]["status"] == 202
    assert await count_rows(engine, "deliveries") == 4


async def test_a_failed_item_leaves_its_key_free(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    missing = await client.post(
        "/v1/deliveries/batch",
        json={"items": [item("ep_01J00000000000000000000000", 0, idempotency_key="retry-me")]},
        headers=tenant,
    )
    assert missing.json()["items"][0]["status"] == 404
    fixed = await client.post(
        "/v1/deliveries/batch",
        json={"items": [item(endpoint["id"], 0, idempotency_key="retry-me")]},
        headers=tenant,
    )
    assert fixed.json()["items"][0]["status"] == 202


async def test_concurrent_batches_with_one_key_make_one_delivery(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any], engine: AsyncEngine
) -> None:
    body = {"items": [item(endpoint["id"], 0, idempotency_key="shared")]}
    responses = await asyncio.gather(
        *(client.post("/v1/deliveries/batch", json=body, headers=tenant) for _ in range(10))
    )
    statuses = sorted(r.json()["items"][0]["status"] for r in responses)
    assert statuses == [200] * 9 + [202]
    assert await count_rows(engine, "deliveries") == 1


async def test_batch_limits(client: httpx.AsyncClient, tenant: dict[str, str]) -> None:
    empty = await client.post("/v1/deliveries/batch", json={"items": []}, headers=tenant)
    assert empty.status_code == 422
    too_many = await client.post(
        "/v1/deliveries/batch",
        json={"items": [item("ep_x", n) for n in range(1001)]},
        headers=tenant,
    )
    assert too_many.status_code == 422
    assert too_many.headers["content-type"] == "application/problem+json"
