"""POST /v1/deliveries/batch: one transaction, per-item idempotency keys, per-item errors."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import new_endpoint, new_tenant, wakeups_written
from tests.fixtures.waiting import count_rows

PROBLEM_TYPES = "https://herald.dev/problems/"


def item(endpoint_id: str, n: int, **extra: Any) -> dict[str, Any]:
    return {"endpoint_id": endpoint_id, "event_type": "batch.test", "payload": {"n": n}, **extra}


async def test_a_thousand_intents_in_one_request(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any], engine: AsyncEngine
) -> None:
    items = [item(endpoint["id"], n) for n in range(1000)]
    wakeups_before = await wakeups_written(engine)
    response = await client.post("/v1/deliveries/batch", json={"items": items}, headers=tenant)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["accepted"], body["replayed"], body["failed"]) == (1000, 0, 0)
    assert [r["index"] for r in body["items"]] == list(range(1000))
    ids = [r["delivery"]["id"] for r in body["items"]]
    assert len(set(ids)) == 1000
    assert await count_rows(engine, "deliveries") == 1000
    assert await count_rows(engine, "events") == 1000
    # One outbox wake-up for the one destination, however many deliveries it has.
    assert await wakeups_written(engine) == wakeups_before + 1
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


async def test_items_are_judged_alike_in_every_part_of_a_batch(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any], engine: AsyncEngine
) -> None:
    """The batch is worked through a part at a time (the API's loop serves others between):
    a bad item fails alone wherever it sits, and a key used twice is caught across parts."""
    items = [item(endpoint["id"], n) for n in range(1000)]
    items[250] = {"endpoint_id": endpoint["id"], "payload": {}}  # no event_type
    items[999] = item(endpoint["id"], 999, surprise=True)
    items[5] = item(endpoint["id"], 5, idempotency_key="twice")
    items[705] = item(endpoint["id"], 705, idempotency_key="twice")
    response = await client.post("/v1/deliveries/batch", json={"items": items}, headers=tenant)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["accepted"], body["replayed"], body["failed"]) == (997, 0, 3)
    assert [r["index"] for r in body["items"]] == list(range(1000))
    failed = {r["index"]: r["error"]["detail"] for r in body["items"] if r["status"] >= 400}
    assert sorted(failed) == [250, 705, 999]
    assert "event_type" in failed[250] and "surprise" in failed[999]
    assert "appears twice" in failed[705]
    assert await count_rows(engine, "deliveries") == 997


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


async def test_batches_claiming_shared_keys_in_opposite_orders_all_succeed(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any], engine: AsyncEngine
) -> None:
    keyed = [item(endpoint["id"], n, idempotency_key=f"shared-{n:02d}") for n in range(30)]
    bodies = [{"items": keyed if turn % 2 else keyed[::-1]} for turn in range(32)]
    responses = await asyncio.gather(
        *(client.post("/v1/deliveries/batch", json=body, headers=tenant) for body in bodies)
    )
    # Claims in opposite orders deadlocked, and a deadlock was a 500. Keys are now claimed in
    # one order, so there is no deadlock at all (a lost one would be a 503 "transaction
    # conflict"); a busy database may still ask a client to come back, never fail it.
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {200, 503} and 200 in statuses, [r.text for r in responses]
    for response in responses:
        if response.status_code == 503:
            assert int(response.headers["retry-after"]) > 0
            assert response.json()["type"] != PROBLEM_TYPES + "transaction-conflict"
    delivery_of_key: dict[str, set[str]] = {}
    for response, body in zip(responses, bodies, strict=True):
        if response.status_code == 503:
            continue
        for result, sent in zip(response.json()["items"], body["items"], strict=True):
            assert result["status"] in (200, 202), result
            delivery_of_key.setdefault(sent["idempotency_key"], set()).add(result["delivery"]["id"])
    assert all(len(ids) == 1 for ids in delivery_of_key.values())
    assert await count_rows(engine, "idempotency_keys") == 30
    assert await count_rows(engine, "deliveries") == 30
