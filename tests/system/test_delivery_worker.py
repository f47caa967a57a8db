"""Deliveries through a real `herald worker` process to a real receiver on 127.0.0.1."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from app import __version__
from app.core.ids import id_floor
from tests.fixtures.api import new_endpoint
from tests.fixtures.processes import HeraldProcess, free_port, running_worker
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.stack import ADMIN, Stack
from tests.fixtures.waiting import eventually

TERMINAL = ("succeeded", "dead")


@pytest.fixture(scope="module")
def worker(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeraldProcess]:
    with running_worker(stack, tmp_path_factory.mktemp("worker") / "worker.log") as process:
        yield process


async def deliver(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint_id: str, payload: Any = None
) -> str:
    response = await client.post(
        "/v1/deliveries",
        json={"endpoint_id": endpoint_id, "event_type": "order.paid", "payload": payload or {}},
        headers=tenant,
    )
    assert response.status_code == 202, response.text
    delivery_id: str = response.json()["id"]
    return delivery_id


async def settled(
    client: httpx.AsyncClient, tenant: dict[str, str], delivery_id: str, timeout: float = 20.0
) -> dict[str, Any]:
    """Poll until the delivery is terminal; returns it."""

    async def read() -> dict[str, Any]:
        body: dict[str, Any] = (
            await client.get(f"/v1/deliveries/{delivery_id}", headers=tenant)
        ).json()
        return body

    return await eventually(read, lambda body: body["state"] in TERMINAL, timeout=timeout)


async def attempt_log(
    client: httpx.AsyncClient, tenant: dict[str, str], delivery_id: str
) -> list[dict[str, Any]]:
    response = await client.get(f"/v1/deliveries/{delivery_id}/attempts", headers=tenant)
    items: list[dict[str, Any]] = response.json()["items"]
    return items


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
async def test_redrive_of_a_dead_delivery_succeeds_under_the_same_id(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    receiver.script("/later", Reply(400))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/later"))
    delivery_id = await deliver(client, tenant, endpoint["id"])
    assert (await settled(client, tenant, delivery_id))["state"] == "dead"

    redriven = await client.post(f"/v1/deliveries/{delivery_id}/redrive", headers=tenant)
    assert redriven.status_code == 202 and redriven.json()["state"] == "pending"
    again = await client.post(f"/v1/deliveries/{delivery_id}/redrive", headers=tenant)
    assert again.status_code in (202, 409)  # 409 once it is no longer dead

    final = await settled(client, tenant, delivery_id)
    requests = await receiver.wait_for("/later", 2)
    assert final["state"] == "succeeded" and final["id"] == delivery_id
    assert {r.headers["Idempotency-Key"] for r in requests} == {delivery_id}
    log = await attempt_log(client, tenant, delivery_id)
    assert [a["outcome"] for a in log] == ["permanent", "success"]


async def test_redrive_of_a_live_delivery_is_409(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    delivery_id = await deliver(client, tenant, endpoint["id"])
    response = await client.post(f"/v1/deliveries/{delivery_id}/redrive", headers=tenant)
    assert response.status_code == 409
    assert response.headers["content-type"] == "application/problem+json"


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


@pytest.mark.usefixtures("worker")
async def test_bulk_redrive_sends_again_only_what_the_filter_matches(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver, engine: AsyncEngine
) -> None:
    receiver.script("/bulk-a", *[Reply(400)] * 6)
    receiver.script("/bulk-b", *[Reply(400)] * 2)
    first = await new_endpoint(client, tenant, url=receiver.url("/bulk-a"))
    second = await new_endpoint(client, tenant, url=receiver.url("/bulk-b"))
    mine = [await deliver(client, tenant, first["id"], {"n": n}) for n in range(6)]
    others = [await deliver(client, tenant, second["id"], {"n": n}) for n in range(2)]
    for delivery_id in mine + others:
        assert (await settled(client, tenant, delivery_id))["state"] == "dead"

    started = await client.post(
        "/v1/deliveries/redrive", json={"endpoint_id": first["id"]}, headers=tenant
    )
    assert started.status_code == 202 and started.json()["status"] == "queued"
    location = started.headers["location"]

    async def progress() -> dict[str, Any]:
        body: dict[str, Any] = (await client.get(location, headers=tenant)).json()
        assert body["status"] in ("queued", "running", "succeeded"), body
        return body

    job = await eventually(progress, lambda body: body["status"] == "succeeded", timeout=20)
    assert job["redriven"] == 6
    for delivery_id in mine:
        assert (await settled(client, tenant, delivery_id))["state"] == "succeeded"
    for delivery_id in others:
        got = (await client.get(f"/v1/deliveries/{delivery_id}", headers=tenant)).json()
        assert got["state"] == "dead"
    assert len(receiver.on("/bulk-b")) == 2


@pytest.mark.usefixtures("worker")
async def test_timeline_after_a_redrive_tells_the_whole_story(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    receiver.script("/story", *[Reply(500)] * 5)  # MAX_ATTEMPTS: 4 + 1, all refused
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/story"))
    delivery_id = await deliver(client, tenant, endpoint["id"])
    assert (await settled(client, tenant, delivery_id))["state"] == "dead"
    redriven = await client.post(f"/v1/deliveries/{delivery_id}/redrive", headers=tenant)
    assert redriven.status_code == 202

    timeline = (await settled(client, tenant, delivery_id))["timeline"]
    # Durations are the clock's business; everything else is the story.
    steps = [(s["event"], re.sub(r", \d+ ms\)$", ")", s["detail"] or "")) for s in timeline]
    assert steps == [
        ("accepted", ""),
        ("published", "handed to the queue"),
        *[("attempt", f"#{n}: retryable (500)") for n in range(1, 6)],
        ("dead", "max_attempts_exhausted (5)"),
        ("redriven", "on request"),
        ("published", "handed to the queue"),
        ("attempt", "#6: success (200)"),
        ("succeeded", ""),
    ]
    times = [step["at"] for step in timeline]
    assert times == sorted(times)
