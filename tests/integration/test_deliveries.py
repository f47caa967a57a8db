"""Accepting delivery intents: one transaction, honest statuses, idempotency keys."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.ids import looks_like
from tests.fixtures.api import new_endpoint, wakeups_written
from tests.fixtures.waiting import count_rows

PROBLEM = "application/problem+json"


def intent(endpoint_id: str, **extra: Any) -> dict[str, Any]:
    return {"endpoint_id": endpoint_id, "event_type": "invoice.paid", "payload": {"n": 1}, **extra}


async def test_accepted_intent_is_pending_with_its_outbox_row(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    payload = {"invoice": "in_1", "amount": 4200, "note": "héllo", "nested": {"a": [1, 2]}}
    response = await client.post(
        "/v1/deliveries", json=intent(endpoint["id"], payload=payload), headers=tenant
    )

    assert response.status_code == 202, response.text
    body = response.json()
    assert looks_like("dlv", body["id"]) and looks_like("evt", body["event_id"])
    assert response.headers["location"] == f"/v1/deliveries/{body['id']}"
    assert body["state"] == "pending" and body["attempt_count"] == 0
    assert body["endpoint_id"] == endpoint["id"]
    assert await wakeups_written(engine) == 1  # its destination's wake-up, in the outbox
    async with engine.connect() as connection:
        stored = (
            await connection.execute(
                text("SELECT payload FROM events WHERE id = :e"), {"e": body["event_id"]}
            )
        ).scalar_one()
    # The bytes every attempt will send: the same JSON, encoded once.
    assert json.loads(stored) == payload

    fetched = await client.get(f"/v1/deliveries/{body['id']}", headers=tenant)
    assert fetched.status_code == 200
    # The API's fast path may already have published it (no worker runs in this test).
    assert fetched.json()["state"] in ("pending", "enqueued")
    assert set(fetched.json()) >= {
        "id",
        "endpoint_id",
        "event_id",
        "event_type",
        "state",
        "attempt_count",
        "next_attempt_at",
        "lease_until",
        "last_outcome",
        "created_at",
        "updated_at",
        "completed_at",
    }


async def test_deliver_after_sets_the_first_attempt_time(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    later = datetime.now(UTC) + timedelta(hours=3)
    response = await client.post(
        "/v1/deliveries",
        json=intent(endpoint["id"], deliver_after=later.isoformat()),
        headers=tenant,
    )
    assert response.status_code == 202
    due = datetime.fromisoformat(response.json()["next_attempt_at"])
    assert abs((due - later).total_seconds()) < 0.001


async def test_deliver_after_without_offset_is_422(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    response = await client.post(
        "/v1/deliveries",
        json=intent(endpoint["id"], deliver_after="2030-01-01T00:00:00"),
        headers=tenant,
    )
    assert response.status_code == 422
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["errors"][0]["loc"] == ["body", "deliver_after"]


async def test_validation_errors_are_problem_json_and_write_nothing(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    cases: list[tuple[Any, str]] = [
        ({"event_type": "x", "payload": {}}, "endpoint_id"),
        (intent(endpoint["id"], payload=[1, 2]), "payload"),
        (intent(endpoint["id"], payload="text"), "payload"),
        (intent(endpoint["id"], event_type=""), "event_type"),
        (intent(endpoint["id"], event_type="has space"), "event_type"),
        (intent(endpoint["id"], surprise=True), "surprise"),
        ("not an object", ""),
    ]
    for body, field in cases:
        response = await client.post("/v1/deliveries", json=body, headers=tenant)
        assert response.status_code == 422, (body, response.text)
        assert response.headers["content-type"] == PROBLEM
        problem = response.json()
        assert problem["status"] == 422 and problem["title"] and problem["type"]
        assert field in problem["detail"]

    broken = await client.post(
        "/v1/deliveries",
        content=b'{"endpoint_id": ',
        headers={**tenant, "Content-Type": "application/json"},
    )
    assert broken.status_code == 422
    assert broken.headers["content-type"] == PROBLEM
    assert await count_rows(engine, "deliveries") == 0
    assert await wakeups_written(engine) == 0


async def test_payload_over_the_limit_is_413(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    big = {"blob": "x" * 262_144}
    response = await client.post(
        "/v1/deliveries", json=intent(endpoint["id"], payload=big), headers=tenant
    )
    assert response.status_code == 413
    assert response.headers["content-type"] == PROBLEM

    huge = json.dumps(intent(endpoint["id"], payload={"blob": "y" * 2_000_000})).encode()
    streamed = await client.post(
        "/v1/deliveries",
        content=huge,
        headers={**tenant, "Content-Type": "application/json"},
    )
    assert streamed.status_code == 413
    assert await count_rows(engine, "events") == 0


async def test_payload_just_under_the_limit_is_accepted(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    # {"blob":"..."} is 11 bytes of JSON around the string.
    payload = {"blob": "x" * (262_144 - 11)}
    response = await client.post(
        "/v1/deliveries", json=intent(endpoint["id"], payload=payload), headers=tenant
    )
    assert response.status_code == 202


async def test_unknown_endpoint_is_404_and_disabled_endpoint_is_409(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    unknown = "ep_01ARZ3NDEKTSV4RRFFQ69G5FAV"
    missing = await client.post("/v1/deliveries", json=intent(unknown), headers=tenant)
    assert missing.status_code == 404
    assert missing.headers["content-type"] == PROBLEM

    disabled = await new_endpoint(client, tenant, enabled=False)
    refused = await client.post("/v1/deliveries", json=intent(disabled["id"]), headers=tenant)
    assert refused.status_code == 409
    assert refused.headers["content-type"] == PROBLEM
    assert await count_rows(engine, "deliveries") == 0
