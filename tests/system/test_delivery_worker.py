"""Deliveries through a real `herald worker` process to a real receiver on 127.0.0.1."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from app import __version__
from app.core.ids import id_floor
from tests.fixtures.api import new_endpoint
from tests.fixtures.deliveries import attempt_log, deliver, settled
from tests.fixtures.processes import free_port
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.stack import ADMIN


@pytest.mark.usefixtures("worker")
async def test_delivery_arrives_signed_and_succeeds(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/ok"))
    payload = {"order": 42, "note": "naïve café"}
    delivery_id = await deliver(client, tenant, endpoint["id"], payload)

    [request] = await receiver.wait_for("/ok", 1)
    final = await settled(client, tenant, delivery_id)

    assert final["state"] == "succeeded" and final["attempt_count"] == 1
    assert final["last_outcome"] == "success" and final["completed_at"] is not None
    assert request.headers["Idempotency-Key"] == delivery_id
    assert request.headers["webhook-id"] == delivery_id
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["User-Agent"] == f"Herald/{__version__}"
    # The receiver's own check, with the library receivers use.
    verified = Webhook(endpoint["secret"]).verify(request.body, request.headers)
    assert verified == payload
    [attempt] = await attempt_log(client, tenant, delivery_id)
    assert attempt["status_code"] == 200 and attempt["outcome"] == "success"
    assert attempt["response_body"] == "ok"


@pytest.mark.usefixtures("worker")
async def test_500_500_200_is_three_attempts_with_one_key(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    receiver.script("/flaky", Reply(500), Reply(503, body=b"busy"), Reply(200))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/flaky"))
    delivery_id = await deliver(client, tenant, endpoint["id"], {"n": 1})

    requests = await receiver.wait_for("/flaky", 3)
    final = await settled(client, tenant, delivery_id)

    assert final["state"] == "succeeded" and final["attempt_count"] == 3
    assert {r.headers["Idempotency-Key"] for r in requests} == {delivery_id}
    assert {r.headers["webhook-id"] for r in requests} == {delivery_id}
    assert len({r.body for r in requests}) == 1  # the same bytes every time
    log = await attempt_log(client, tenant, delivery_id)
    assert [(a["attempt_number"], a["status_code"], a["outcome"]) for a in log] == [
        (1, 500, "retryable"),
        (2, 503, "retryable"),
        (3, 200, "success"),
    ]
    assert log[1]["response_body"] == "busy"


@pytest.mark.usefixtures("worker")
async def test_429_retry_after_delays_the_next_attempt(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    receiver.script("/limited", Reply(429, headers={"Retry-After": "2"}))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/limited"))
    delivery_id = await deliver(client, tenant, endpoint["id"])

    first, second = await receiver.wait_for("/limited", 2)
    final = await settled(client, tenant, delivery_id)

    # The schedule alone would retry after ~0.3 s; the receiver asked for 2 s.
    assert second.at - first.at >= 2.0
    assert final["state"] == "succeeded"


@pytest.mark.usefixtures("worker")
async def test_400_is_dead_after_one_attempt(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    receiver.script("/reject", Reply(400, body=b'{"error": "bad"}'))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/reject"))
    delivery_id = await deliver(client, tenant, endpoint["id"])

    final = await settled(client, tenant, delivery_id)
    await asyncio.sleep(1)  # longer than the retry schedule: no second request may come

    assert final["state"] == "dead" and final["attempt_count"] == 1
    assert final["last_outcome"] == "permanent" and "400" in final["dead_reason"]
    assert len(receiver.on("/reject")) == 1
    dead = await client.get("/v1/deliveries", params={"state": "dead"}, headers=tenant)
    assert [d["id"] for d in dead.json()["items"]] == [delivery_id]


@pytest.mark.usefixtures("worker")
async def test_410_disables_the_endpoint(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    receiver.script("/gone", Reply(410))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/gone"))
    delivery_id = await deliver(client, tenant, endpoint["id"])

    final = await settled(client, tenant, delivery_id)
    current = (await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)).json()

    assert final["state"] == "dead"
    assert current["enabled"] is False and "410" in current["disabled_reason"]
    refused = await client.post(
        "/v1/deliveries",
        json={"endpoint_id": endpoint["id"], "event_type": "a", "payload": {}},
        headers=tenant,
    )
    assert refused.status_code == 409


@pytest.mark.usefixtures("worker")
async def test_receiver_that_never_answers_is_unknown_then_retried_with_the_same_key(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    receiver.script("/silent", Reply(delay=30))  # far past the 1.5 s attempt timeout
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/silent"))
    delivery_id = await deliver(client, tenant, endpoint["id"])

    first, second = await receiver.wait_for("/silent", 2)
    final = await settled(client, tenant, delivery_id)

    assert first.headers["Idempotency-Key"] == second.headers["Idempotency-Key"] == delivery_id
    log = await attempt_log(client, tenant, delivery_id)
    assert [a["outcome"] for a in log] == ["unknown", "success"]
    assert "after sending" in log[0]["error"]
    assert final["state"] == "succeeded"


@pytest.mark.usefixtures("worker")
async def test_slow_trickle_is_bounded_by_the_attempt_timeout(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    # Status at once, then one body byte every 0.2 s for 40 s: a per-read timeout never fires.
    receiver.script("/trickle", Reply(503, body=b"x" * 200, trickle=0.2))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/trickle"))
    delivery_id = await deliver(client, tenant, endpoint["id"])

    final = await settled(client, tenant, delivery_id)
    log = await attempt_log(client, tenant, delivery_id)

    # Cut off at the 1.5 s attempt timeout, long before the 40 s trickle would have ended; the
    # status it had already answered decides.
    assert 1400 <= log[0]["duration_ms"] < 40_000
    assert log[0]["status_code"] == 503 and log[0]["outcome"] == "retryable"
    assert "reading the response" in log[0]["error"]
    assert final["state"] == "succeeded" and len(log) == 2


@pytest.mark.usefixtures("worker")
async def test_redirect_is_not_followed(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    receiver.script("/moved", Reply(302, headers={"Location": receiver.url("/elsewhere")}))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/moved"))
    delivery_id = await deliver(client, tenant, endpoint["id"])

    final = await settled(client, tenant, delivery_id)

    assert final["state"] == "dead" and final["last_status_code"] == 302
    assert receiver.on("/elsewhere") == []


@pytest.mark.usefixtures("worker")
async def test_large_response_is_read_only_in_part_and_stored_truncated(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    receiver.script("/chatty", Reply(500, body=b"\x00ab" * 400_000))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/chatty"))
    delivery_id = await deliver(client, tenant, endpoint["id"])

    await settled(client, tenant, delivery_id)
    log = await attempt_log(client, tenant, delivery_id)

    stored = log[0]["response_body"]
    assert "\x00" not in stored and stored.startswith("abab")
    assert len(stored.encode()) <= 4096


@pytest.mark.usefixtures("worker")
async def test_connection_refused_is_retryable(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:

    endpoint = await new_endpoint(client, tenant, url=f"http://127.0.0.1:{free_port()}/")
    delivery_id = await deliver(client, tenant, endpoint["id"])

    final = await settled(client, tenant, delivery_id)
    log = await attempt_log(client, tenant, delivery_id)

    assert final["state"] == "dead" and final["attempt_count"] == 5  # MAX_ATTEMPTS: 4 + 1
    assert {a["outcome"] for a in log} == {"retryable"}
    assert "max_attempts_exhausted" in final["dead_reason"]


@pytest.mark.usefixtures("worker")
async def test_a_reconcile_run_is_carried_out_by_a_worker(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    stale_run = id_floor("run", datetime.now(UTC) - timedelta(hours=2))
    async with engine.begin() as connection:
        # A run whose worker died two hours ago, still saying "running".
        await connection.execute(
            text(
                "INSERT INTO reconcile_runs (id, region, trigger, status, started_at)"
                " VALUES (:r, 'local', 'cron', 'running', now() - interval '2 hours')"
            ),
            {"r": stale_run},
        )
    started = await client.post("/v1/reconcile", json={"trigger": "cron"}, headers=ADMIN)
    location = started.headers["location"]
    deadline = asyncio.get_running_loop().time() + 20
    while (run := (await client.get(location, headers=ADMIN)).json())["status"] in (
        "queued",
        "running",
    ):
        assert asyncio.get_running_loop().time() < deadline, run
        await asyncio.sleep(0.05)
    assert run["status"] == "succeeded" and run["trigger"] == "cron"
    scans = {"destinations_checked", "destinations_armed", "unpublished_outbox"}
    assert set(run["counts"]) >= scans | {"purged_deliveries"}
    abandoned = await client.get(f"/v1/reconcile/runs/{stale_run}", headers=ADMIN)
    assert abandoned.json()["status"] == "failed" and "abandoned" in abandoned.json()["error"]


@pytest.mark.usefixtures("worker")
async def test_rotated_secret_signs_alongside_the_old_one_during_the_overlap(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver, engine: AsyncEngine
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/rotating"))
    old = endpoint["secret"]
    rotated = await client.post(f"/v1/endpoints/{endpoint['id']}/secret/rotate", headers=tenant)
    assert rotated.status_code == 200
    new = rotated.json()["secret"]
    assert new != old and new.startswith("whsec_")
    assert rotated.json()["previous_secret_expires_at"] is not None
    current = await client.get(f"/v1/endpoints/{endpoint['id']}/secret", headers=tenant)
    assert current.json()["secret"] == new

    await settled(client, tenant, await deliver(client, tenant, endpoint["id"], {"v": 1}))
    [during] = receiver.on("/rotating")
    assert len(during.headers["webhook-signature"].split(" ")) == 2
    # A receiver still on the old secret and one already on the new both verify.
    assert Webhook(old).verify(during.body, during.headers) == {"v": 1}
    assert Webhook(new).verify(during.body, during.headers) == {"v": 1}

    async with engine.begin() as connection:
        await connection.execute(
            text("UPDATE endpoints SET previous_secret_expires_at = now() - interval '1 second'")
        )
    await settled(client, tenant, await deliver(client, tenant, endpoint["id"], {"v": 2}))
    after = receiver.on("/rotating")[1]
    assert len(after.headers["webhook-signature"].split(" ")) == 1
    assert Webhook(new).verify(after.body, after.headers) == {"v": 2}
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(after.body, after.headers)
