"""Prometheus metrics: fleet gauges from PostgreSQL on the API, counters from each worker."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import fast_path_settled, new_endpoint
from tests.fixtures.observed import sample
from tests.fixtures.processes import free_port, running_worker
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.recovery import states
from tests.fixtures.stack import ADMIN, Stack


async def test_metrics_need_an_admin_key(client: httpx.AsyncClient, tenant: dict[str, str]) -> None:
    assert (await client.get("/metrics")).status_code == 401
    assert (await client.get("/metrics", headers=tenant)).status_code == 403
    assert (await client.get("/metrics", headers=ADMIN)).status_code == 200


async def test_fleet_gauges_after_known_traffic(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any], engine: AsyncEngine
) -> None:
    for n in range(5):
        await client.post(
            "/v1/deliveries",
            json={"endpoint_id": endpoint["id"], "event_type": "m", "payload": {"secret": n}},
            headers=tenant,
        )
    # A destination paused by its owner, its delivery due ten minutes ago: waiting by policy.
    paused = await new_endpoint(client, tenant)
    await client.post(
        "/v1/deliveries",
        json={"endpoint_id": paused["id"], "event_type": "m", "payload": {}},
        headers=tenant,
    )
    # A polling endpoint whose receiver has not polled for ten minutes, and whose last read
    # went unacknowledged: waiting for its receiver by design -- neither late work nor a
    # worker's death.
    polled = await new_endpoint(client, tenant, url=None, delivery="poll")
    for _ in range(2):
        await client.post(
            "/v1/deliveries",
            json={"endpoint_id": polled["id"], "event_type": "m", "payload": {}},
            headers=tenant,
        )
    await fast_path_settled(engine)
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE deliveries SET next_attempt_at = now() - interval '10 minutes'"
                " WHERE endpoint_id = :e OR endpoint_id = :p"
            ),
            {"e": paused["id"], "p": polled["id"]},
        )
        await connection.execute(
            text(
                "UPDATE deliveries SET state = 'leased', attempt_count = 1, lease_token ="
                " gen_random_uuid(), lease_until = now() - interval '1 second' WHERE id ="
                " (SELECT min(id) FROM deliveries WHERE endpoint_id = :p)"
            ),
            {"p": polled["id"]},
        )
        await connection.execute(
            text("UPDATE endpoints SET paused_until = now() + interval '1 minute' WHERE id = :e"),
            {"e": paused["id"]},
        )
        first = (
            await connection.execute(
                text("SELECT min(id) FROM deliveries WHERE endpoint_id = :e"),
                {"e": endpoint["id"]},
            )
        ).scalar_one()
        await connection.execute(
            text(
                "UPDATE deliveries SET state = 'dead', completed_at = now(),"
                " dead_reason = 'permanent_failure: HTTP 400' WHERE id = :d"
            ),
            {"d": first},
        )
        await connection.execute(
            text(
                "UPDATE deliveries SET state = 'pending', next_attempt_at = now() - interval"
                " '90 seconds' WHERE id = (SELECT max(id) FROM deliveries WHERE endpoint_id = :e)"
            ),
            {"e": endpoint["id"]},
        )
        # A retry due since 30 seconds ago ...
        await connection.execute(
            text(
                "UPDATE deliveries SET state = 'enqueued', attempt_count = 1, next_attempt_at ="
                " now() - interval '30 seconds' WHERE id = (SELECT min(id) FROM deliveries"
                " WHERE state = 'pending')"
            )
        )
        # ... one whose worker died, its lease run out ...
        await connection.execute(
            text(
                "UPDATE deliveries SET state = 'leased', attempt_count = 1, lease_token ="
                " gen_random_uuid(), lease_until = now() - interval '1 second' WHERE id ="
                " (SELECT min(id) FROM deliveries WHERE state = 'pending')"
            )
        )
        # ... and a wake-up the API wrote two minutes ago and never published, its id above
        # a younger one's (ids follow the insert, not the transaction's start).
        await connection.execute(
            text(
                "INSERT INTO outbox_wakeups (region, tenant_id, endpoint_id, run_at, created_at)"
                " SELECT 'local', tenant_id, id, now(), now() - age FROM endpoints,"
                " (VALUES (interval '1 minute'), (interval '2 minutes')) AS written (age)"
                " WHERE id = :e ORDER BY age"
            ),
            {"e": endpoint["id"]},
        )
        # An operational signal the workers' relay has not told for three minutes.
        await connection.execute(
            text(
                "INSERT INTO operational_signals (tenant_id, type, payload, created_at)"
                " VALUES ('ten_x', 'herald.endpoint.created', '{}', now() - interval '3 minutes')"
            )
        )
    body = (await client.get("/metrics", headers=ADMIN)).text

    assert sample(body, "herald_deliveries", region="local", state="dead") == 1
    assert sample(body, "herald_deliveries", region="local", state="enqueued") == 1
    assert sample(body, "herald_deliveries", region="local", state="pending") == 4
    assert sample(body, "herald_deliveries", region="local", state="leased") == 2
    assert sample(body, "herald_expired_leases", region="local") == 1
    assert 89 <= sample(body, "herald_oldest_due_age_seconds", region="local") < 200
    assert 29 <= sample(body, "herald_oldest_enqueued_age_seconds", region="local") < 89
    assert 119 <= sample(body, "herald_outbox_relay_lag_seconds", region="local") < 300
    assert 179 <= sample(body, "herald_operational_signal_lag_seconds", region="local") < 400
    assert sample(body, "herald_endpoints", condition="paused") == 1
    assert "dlv_" not in body and "secret" not in body


async def test_worker_counters_after_known_traffic(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    receiver.script("/counted", Reply(200), Reply(200), Reply(400))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/counted"), max_in_flight=1)
    port = free_port()
    with running_worker(stack, tmp_path / "worker.log", HERALD_WORKER_METRICS_PORT=str(port)):
        ids = []
        for n in range(3):
            response = await client.post(
                "/v1/deliveries",
                json={"endpoint_id": endpoint["id"], "event_type": "m", "payload": {"n": n}},
                headers=tenant,
            )
            ids.append(response.json()["id"])
        await receiver.wait_for("/counted", 3)
        for _ in range(100):
            if set((await states(engine, ids)).values()) <= {"succeeded", "dead"}:
                break
            await asyncio.sleep(0.05)
        async with httpx.AsyncClient() as http:
            body = (await http.get(f"http://127.0.0.1:{port}/metrics")).text

    assert sample(body, "herald_attempts_total", outcome="success") == 2
    assert sample(body, "herald_attempts_total", outcome="permanent") == 1
    assert sample(body, "herald_attempt_duration_seconds_count") == 3
    assert sample(body, "herald_dispatches_total") == 3
    # No label grows with what tenants make: no delivery, endpoint or tenant id anywhere.
    assert "dlv_" not in body and "ep_" not in body and "ten_" not in body
