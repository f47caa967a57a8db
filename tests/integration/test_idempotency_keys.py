"""Idempotency keys on POST /v1/deliveries: a repeat replays, a different request with the key
is refused, and a request the one-statement accept cannot answer -- its key held, or a
refusal -- is answered by reading the key first."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import new_endpoint, new_tenant, wakeups_written
from tests.fixtures.waiting import count_rows

PROBLEM = "application/problem+json"
POSITIVE = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}


def intent(endpoint_id: str, **extra: Any) -> dict[str, Any]:
    return {"endpoint_id": endpoint_id, "event_type": "invoice.paid", "payload": {"n": 1}, **extra}


async def key_row(engine: AsyncEngine, key: str) -> tuple[str, int] | None:
    async with engine.connect() as connection:
        row = (
            await connection.execute(
                text("SELECT resource_id, response_status FROM idempotency_keys WHERE key = :k"),
                {"k": key},
            )
        ).first()
    return None if row is None else (row.resource_id, row.response_status)


async def test_a_keyed_accept_commits_its_key_with_the_event(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    accepted = await client.post(
        "/v1/deliveries", json=intent(endpoint["id"]), headers={**tenant, "Idempotency-Key": "k-1"}
    )
    assert accepted.status_code == 202, accepted.text
    assert await key_row(engine, "k-1") == (accepted.json()["event_id"], 202)


async def test_same_key_same_body_replays_the_original(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    headers = {**tenant, "Idempotency-Key": "order-17"}
    first = await client.post("/v1/deliveries", json=intent(endpoint["id"]), headers=headers)
    again = await client.post("/v1/deliveries", json=intent(endpoint["id"]), headers=headers)

    assert first.status_code == 202 and "idempotent-replayed" not in first.headers
    assert again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert again.headers["location"] == first.headers["location"]
    assert await count_rows(engine, "deliveries") == 1
    assert await wakeups_written(engine) == 1


async def test_quoted_key_is_the_same_key_as_bare(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    bare = await client.post(
        "/v1/deliveries", json=intent(endpoint["id"]), headers={**tenant, "Idempotency-Key": "k1"}
    )
    quoted = await client.post(
        "/v1/deliveries",
        json=intent(endpoint["id"]),
        headers={**tenant, "Idempotency-Key": '"k1"'},
    )
    assert quoted.status_code == 200
    assert quoted.json()["id"] == bare.json()["id"]


async def test_same_key_different_body_is_422(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    headers = {**tenant, "Idempotency-Key": "order-18"}
    first = await client.post("/v1/deliveries", json=intent(endpoint["id"]), headers=headers)
    changed = await client.post(
        "/v1/deliveries", json=intent(endpoint["id"], payload={"n": 2}), headers=headers
    )
    assert first.status_code == 202
    assert changed.status_code == 422
    assert changed.headers["content-type"] == PROBLEM
    assert changed.json()["type"].endswith("/idempotency-mismatch")
    assert await count_rows(engine, "deliveries") == 1


async def test_malformed_idempotency_key_is_400(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    for bad in (b"", b'""', b"x" * 256, b"tab\tinside", "naïve".encode(), b"nul\x00inside"):
        response = await client.post(
            "/v1/deliveries",
            json=intent(endpoint["id"]),
            headers=[
                *((k.encode(), v.encode()) for k, v in tenant.items()),
                (b"Idempotency-Key", bad),
            ],
        )
        assert response.status_code == 400, bad
        assert response.headers["content-type"] == PROBLEM
        assert response.json()["detail"] == (
            "Idempotency-Key must be 1-255 printable ASCII characters (space to ~)"
        )
    assert await count_rows(engine, "deliveries") == 0


async def test_twenty_concurrent_posts_with_one_key_make_one_delivery(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    headers = {**tenant, "Idempotency-Key": "burst-1"}
    responses = await asyncio.gather(
        *(
            client.post("/v1/deliveries", json=intent(endpoint["id"]), headers=headers)
            for _ in range(20)
        )
    )
    statuses = sorted(r.status_code for r in responses)
    assert statuses.count(202) == 1
    assert set(statuses) <= {200, 202, 409}
    assert len({r.json()["id"] for r in responses if r.status_code in (200, 202)}) == 1
    assert await count_rows(engine, "deliveries") == 1
    assert await count_rows(engine, "events") == 1
    assert await wakeups_written(engine) == 1


async def test_keys_are_scoped_per_tenant(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    other = await new_tenant(client, "other")
    other_endpoint = await new_endpoint(client, other)
    mine = await client.post(
        "/v1/deliveries",
        json=intent(endpoint["id"]),
        headers={**tenant, "Idempotency-Key": "shared"},
    )
    theirs = await client.post(
        "/v1/deliveries",
        json=intent(other_endpoint["id"]),
        headers={**other, "Idempotency-Key": "shared"},
    )
    assert mine.status_code == theirs.status_code == 202
    assert mine.json()["id"] != theirs.json()["id"]


async def test_an_expired_key_can_be_used_again(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    headers = {**tenant, "Idempotency-Key": "reused-later"}
    first = await client.post("/v1/deliveries", json=intent(endpoint["id"]), headers=headers)
    async with engine.begin() as connection:
        await connection.execute(
            text("UPDATE idempotency_keys SET expires_at = now() - interval '1 second'")
        )
    later = await client.post(
        "/v1/deliveries", json=intent(endpoint["id"], payload={"n": 3}), headers=headers
    )
    assert later.status_code == 202
    assert later.json()["id"] != first.json()["id"]
    assert await count_rows(engine, "deliveries") == 2


async def test_a_replay_answers_after_the_endpoint_is_disabled(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    headers = {**tenant, "Idempotency-Key": "before-disabling"}
    first = await client.post("/v1/deliveries", json=intent(endpoint["id"]), headers=headers)
    await client.patch(f"/v1/endpoints/{endpoint['id']}", json={"enabled": False}, headers=tenant)
    again = await client.post("/v1/deliveries", json=intent(endpoint["id"]), headers=headers)
    fresh = await client.post(
        "/v1/deliveries", json=intent(endpoint["id"]), headers={**tenant, "Idempotency-Key": "new"}
    )

    assert first.status_code == 202
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert fresh.status_code == 409 and fresh.headers["content-type"] == PROBLEM
    assert await key_row(engine, "new") is None
    assert await count_rows(engine, "deliveries") == 1


async def test_a_replay_answers_after_a_schema_would_refuse_it(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    headers = {**tenant, "Idempotency-Key": "before-the-schema"}
    zero = intent(endpoint["id"], payload={"n": 0})
    first = await client.post("/v1/deliveries", json=zero, headers=headers)
    defined = await client.post(
        "/v1/event-types", json={"name": "invoice.paid", "schema": POSITIVE}, headers=tenant
    )
    again = await client.post("/v1/deliveries", json=zero, headers=headers)
    refused = await client.post(
        "/v1/deliveries", json=zero, headers={**tenant, "Idempotency-Key": "after-the-schema"}
    )

    assert first.status_code == 202 and defined.status_code == 201, defined.text
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert refused.status_code == 422 and "minimum" in refused.json()["detail"]
    assert await key_row(engine, "after-the-schema") is None
    assert await count_rows(engine, "deliveries") == 1


async def test_a_refused_request_leaves_its_key_free_for_the_corrected_one(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    headers = {**tenant, "Idempotency-Key": "typo-first"}
    missing = await client.post(
        "/v1/deliveries", json=intent("ep_01J0000000000000000000000Z"), headers=headers
    )
    corrected = await client.post("/v1/deliveries", json=intent(endpoint["id"]), headers=headers)

    assert missing.status_code == 404 and missing.headers["content-type"] == PROBLEM
    assert corrected.status_code == 202, corrected.text
    assert await key_row(engine, "typo-first") == (corrected.json()["event_id"], 202)
    assert await count_rows(engine, "deliveries") == 1


async def test_a_key_held_by_another_route_is_a_mismatch(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    headers = {**tenant, "Idempotency-Key": "event-first"}
    subscribed = await new_endpoint(client, tenant, event_types=["invoice.paid"])
    fanned = await client.post(
        "/v1/events", json={"event_type": "invoice.paid", "payload": {"n": 1}}, headers=headers
    )
    single = await client.post("/v1/deliveries", json=intent(subscribed["id"]), headers=headers)

    assert fanned.status_code == 202, fanned.text
    assert single.status_code == 422
    assert single.json()["type"].endswith("/idempotency-mismatch")
    assert await count_rows(engine, "deliveries") == len(fanned.json()["deliveries"])
