"""Endpoint registration, changes and deletion."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from tests.fixtures.api import new_endpoint

PROBLEM = "application/problem+json"


async def test_created_endpoint_has_an_id_and_a_standard_webhooks_secret(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    response = await client.post(
        "/v1/endpoints",
        json={
            "url": "http://127.0.0.1:8080/hooks",
            "description": "billing",
            "event_types": ["invoice.paid", "invoice.voided"],
            "rate_limit_per_second": 20,
            "max_in_flight": 5,
        },
        headers=tenant,
    )
    assert response.status_code == 201
    body = response.json()
    assert body["id"].startswith("ep_")
    assert response.headers["location"] == f"/v1/endpoints/{body['id']}"
    assert body["enabled"] is True and body["event_types"] == ["invoice.paid", "invoice.voided"]
    secret = body["secret"]
    assert secret.startswith("whsec_") and len(base64.b64decode(secret[6:])) >= 24
    # The secret is one the standardwebhooks library accepts.
    Webhook(secret)

    fetched = await client.get(f"/v1/endpoints/{body['id']}", headers=tenant)
    assert fetched.status_code == 200 and "secret" not in fetched.json()
    shown = await client.get(f"/v1/endpoints/{body['id']}/secret", headers=tenant)
    assert shown.json() == {"secret": secret}


async def test_each_endpoint_gets_its_own_secret(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    first = await new_endpoint(client, tenant)
    second = await new_endpoint(client, tenant)
    assert first["secret"] != second["secret"]


async def test_invalid_endpoint_fields_are_422(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    for body in (
        {},
        {"url": "http://127.0.0.1/", "rate_limit_per_second": 0},
        {"url": "http://127.0.0.1/", "max_in_flight": -1},
        {"url": "http://127.0.0.1/", "event_types": ["bad type"]},
        {"url": "http://127.0.0.1/", "colour": "blue"},
        {"url": "ftp://127.0.0.1/"},
    ):
        response = await client.post("/v1/endpoints", json=body, headers=tenant)
        assert response.status_code == 422, body
        assert response.headers["content-type"] == PROBLEM


async def test_patch_changes_only_the_fields_sent(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    endpoint = await new_endpoint(
        client, tenant, description="old", event_types=["a.b"], max_in_flight=3
    )
    path = f"/v1/endpoints/{endpoint['id']}"
    response = await client.patch(
        path, json={"description": "new", "event_types": None}, headers=tenant
    )
    assert response.status_code == 200
    body = response.json()
    assert body["description"] == "new"
    assert body["event_types"] is None  # explicit null: receive every event type
    assert body["max_in_flight"] == 3  # not sent: unchanged
    assert body["url"] == endpoint["url"]
    assert body["updated_at"] >= endpoint["updated_at"]


@pytest.mark.parametrize(
    "field",
    ["url", "enabled", "payload_format", "signature_schemes", "webhook_handshake", "ordering",
     "on_dead"],
)  # fmt: skip
async def test_a_null_for_what_every_endpoint_has_is_refused_not_ignored(
    client: httpx.AsyncClient, tenant: dict[str, str], field: str
) -> None:
    endpoint = await new_endpoint(client, tenant, description="kept")
    path = f"/v1/endpoints/{endpoint['id']}"
    response = await client.patch(path, json={field: None, "description": "x"}, headers=tenant)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"] == (
        f"body.{field}: cannot be null: every endpoint has one; leave it out to keep it as it is"
    )
    after = (await client.get(path, headers=tenant)).json()
    assert after["description"] == "kept" and after[field] == endpoint[field]


async def test_disable_and_reenable(client: httpx.AsyncClient, tenant: dict[str, str]) -> None:
    endpoint = await new_endpoint(client, tenant)
    path = f"/v1/endpoints/{endpoint['id']}"
    disabled = await client.patch(path, json={"enabled": False}, headers=tenant)
    assert disabled.json()["enabled"] is False
    assert disabled.json()["disabled_reason"] == "disabled by user"
    enabled = await client.patch(path, json={"enabled": True}, headers=tenant)
    assert enabled.json()["enabled"] is True and enabled.json()["disabled_reason"] is None


async def test_deleted_endpoint_is_gone_but_its_deliveries_remain(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    delivery = await client.post(
        "/v1/deliveries",
        json={"endpoint_id": endpoint["id"], "event_type": "a.b", "payload": {}},
        headers=tenant,
    )
    path = f"/v1/endpoints/{endpoint['id']}"
    assert (await client.delete(path, headers=tenant)).status_code == 204
    assert (await client.get(path, headers=tenant)).status_code == 404
    assert (await client.delete(path, headers=tenant)).status_code == 404
    assert (await client.get("/v1/endpoints", headers=tenant)).json()["items"] == []
    kept = await client.get(f"/v1/deliveries/{delivery.json()['id']}", headers=tenant)
    assert kept.status_code == 200
    refused = await client.post(
        "/v1/deliveries",
        json={"endpoint_id": endpoint["id"], "event_type": "a.b", "payload": {}},
        headers=tenant,
    )
    assert refused.status_code == 404


async def test_endpoint_list_pages_newest_first(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    created = [(await new_endpoint(client, tenant))["id"] for _ in range(5)]
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/v1/endpoints", params=params, headers=tenant)).json()
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(created))


async def test_garbage_cursor_is_422(client: httpx.AsyncClient, tenant: dict[str, str]) -> None:
    response = await client.get("/v1/endpoints", params={"cursor": "%%%"}, headers=tenant)
    assert response.status_code == 422
    assert response.headers["content-type"] == PROBLEM


async def test_stats_count_recent_attempts_and_show_health(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: Any
) -> None:
    from sqlalchemy import text

    endpoint = await new_endpoint(client, tenant)
    other = await new_endpoint(client, tenant)
    delivery = await client.post(
        "/v1/deliveries",
        json={"endpoint_id": endpoint["id"], "event_type": "a", "payload": {}},
        headers=tenant,
    )
    rows = [  # (minutes ago, outcome, duration in ms, endpoint)
        (5, "success", 100, endpoint["id"]),
        (10, "retryable", 200, endpoint["id"]),
        (30, "success", 300, endpoint["id"]),
        (120, "success", 400, endpoint["id"]),
        (60 * 30, "success", 9000, endpoint["id"]),  # older than a day
        (5, "success", 9000, other["id"]),  # another endpoint's
    ]
    async with engine.begin() as connection:
        for number, (ago, outcome, ms, endpoint_id) in enumerate(rows, start=1):
            await connection.execute(
                text(
                    "INSERT INTO attempts (delivery_id, endpoint_id, attempt_number, started_at,"
                    " duration_ms, outcome) VALUES (:d, :e, :n, now() - make_interval(mins => :a),"
                    " :ms, :o)"
                ),
                {
                    "d": delivery.json()["id"],
                    "e": endpoint_id,
                    "n": number,
                    "a": ago,
                    "ms": ms,
                    "o": outcome,
                },
            )
    stats = (await client.get(f"/v1/endpoints/{endpoint['id']}/stats", headers=tenant)).json()
    assert stats["last_hour"] == {
        "attempts": 3,
        "successes": 2,
        "failures": 1,
        "success_rate": 2 / 3,
        "p95_ms": 290.0,  # interpolated between 200 and 300, as percentile_cont does
    }
    assert stats["last_day"]["attempts"] == 4 and stats["last_day"]["successes"] == 3
    assert stats["last_day"]["p95_ms"] == 385.0
    assert stats["circuit"] == "closed" and stats["enabled"] is True
    missing = await client.get("/v1/endpoints/ep_01J00000000000000000000000/stats", headers=tenant)
    assert missing.status_code == 404


async def test_a_pause_that_has_ended_is_not_shown(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: Any
) -> None:
    from sqlalchemy import text

    ended = await new_endpoint(client, tenant)
    current = await new_endpoint(client, tenant)
    async with engine.begin() as connection:
        # By the database clock: one pause ended a second ago, the other lasts another hour.
        await connection.execute(
            text(
                "UPDATE endpoints SET pause_reason = 'receiver answered 429 with Retry-After',"
                " paused_until = now() + CASE WHEN id = :e THEN interval '-1 second'"
                " ELSE interval '1 hour' END"
            ),
            {"e": ended["id"]},
        )
    url = f"/v1/endpoints/{ended['id']}"
    shown = [
        (await client.get(url, headers=tenant)).json(),
        (await client.get(f"{url}/stats", headers=tenant)).json(),
        (await client.patch(url, json={"description": "x"}, headers=tenant)).json(),
        *[
            item
            for item in (await client.get("/v1/endpoints", headers=tenant)).json()["items"]
            if item["id"] == ended["id"]
        ],
    ]
    for body in shown:
        assert body["paused_until"] is None and body["pause_reason"] is None, body
    still = (await client.get(f"/v1/endpoints/{current['id']}", headers=tenant)).json()
    assert still["paused_until"] is not None
    assert still["pause_reason"] == "receiver answered 429 with Retry-After"
