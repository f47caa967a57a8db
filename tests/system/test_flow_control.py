"""Per-destination flow control, measured at a real receiver with real worker processes."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.ids import new_id
from tests.fixtures.api import new_endpoint, post_deliveries
from tests.fixtures.processes import running_worker, running_workers
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.recovery import states
from tests.fixtures.stack import Stack
from tests.fixtures.waiting import count_rows, until


async def test_rate_and_in_flight_ceilings_hold_across_two_workers(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    # Each answer takes 0.4 s: at 20 starts/s that is 8 at once without the in-flight ceiling.
    receiver.script("/limited", *[Reply(200, delay=0.4)] * 200)
    endpoint = await new_endpoint(
        client, tenant, url=receiver.url("/limited"), rate_limit_per_second=20, max_in_flight=5
    )
    ids = await post_deliveries(client, tenant, endpoint["id"], 200)
    # Generous timeouts: on a starved machine a 0.4 s answer can take over the usual 1.5 s, and
    # its (correct) retry would be a second arrival that this test is not about.
    patient = {"HERALD_REQUEST_TIMEOUT_SECONDS": "10", "HERALD_LEASE_SECONDS": "20"}
    # Started side by side without blocking this event loop: the receiver runs in it, and
    # requests held back while it waited for the second worker would arrive bunched.
    async with running_workers(stack, [tmp_path / "a.log", tmp_path / "b.log"], **patient):

        async def all_delivered() -> bool:
            return set((await states(engine, ids)).values()) == {"succeeded"}

        await until(all_delivered, timeout=90)

    assert len(receiver.on("/limited")) == 200  # each delivered once
    assert receiver.max_in_flight <= 5
    assert receiver.max_in_flight >= 4  # the ceiling, not the rate, was the binding limit
    assert receiver.most_starts_in_any_second("/limited") <= 21
    # Waiting for the gate is not an attempt.
    assert await count_rows(engine, "attempts") == 200
    assert await count_rows(engine, "deliveries", "attempt_count <> 1") == 0


async def _attempt_starts(engine: AsyncEngine, endpoint_id: str) -> list[tuple[str, datetime]]:
    """(delivery id, when the worker started sending) of every attempt to the endpoint."""
    async with engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT delivery_id, started_at FROM attempts WHERE endpoint_id = :e"
                " ORDER BY started_at"
            ),
            {"e": endpoint_id},
        )
        return [(row.delivery_id, row.started_at) for row in rows]


async def test_retry_after_pauses_the_whole_destination_only(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    # The 429 takes 0.5 s to come back, so that requests can be in flight while it does.
    receiver.script("/busy", Reply(429, headers={"Retry-After": "5"}, delay=0.5))
    busy = await new_endpoint(client, tenant, url=receiver.url("/busy"))
    calm = await new_endpoint(client, tenant, url=receiver.url("/calm"))
    with running_worker(stack, tmp_path / "worker.log"):
        [first] = await post_deliveries(client, tenant, busy["id"], 1)
        await receiver.wait_for("/busy", 1)
        # Accepted while the 429 is still on its way: these may start before the pause is
        # recorded -- they were in flight when the receiver asked for it, which is fine.
        concurrent = await post_deliveries(client, tenant, busy["id"], 2)

        async def pause_recorded() -> bool:
            shown = await client.get(f"/v1/endpoints/{busy['id']}", headers=tenant)
            return shown.json()["paused_until"] is not None

        await until(pause_recorded, timeout=30, every=0.02)
        shown = (await client.get(f"/v1/endpoints/{busy['id']}", headers=tenant)).json()
        # Accepted after the pause was recorded: none of these may start before it ends.
        waiting = await post_deliveries(client, tenant, busy["id"], 5)
        flowing = await post_deliveries(client, tenant, calm["id"], 5)
        await receiver.wait_for("/calm", 5)
        await receiver.wait_for("/busy", 9)  # the 429, 2 concurrent, its retry, 5 waiting

    paused_until = datetime.fromisoformat(shown["paused_until"])
    busy_starts = await _attempt_starts(engine, busy["id"])
    held = [at for delivery_id, at in busy_starts if delivery_id in {first, *waiting}][1:]
    assert len(held) == 6  # the refused delivery's retry and the five accepted later
    assert all(at >= paused_until for at in held)
    # The other destination kept flowing while this one was paused.
    assert all(at < paused_until for _, at in await _attempt_starts(engine, calm["id"]))
    assert "429" in shown["pause_reason"]
    assert len(receiver.on("/busy")) == 9  # each delivered once, the refused one twice
    assert set((await states(engine, [first, *concurrent, *waiting, *flowing])).values()) == {
        "succeeded"
    }


async def test_breaker_opens_probes_and_closes(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    receiver.script("/flaky", *[Reply(500)] * 4)  # 3 to open, then a failed probe
    # One at a time, so that the order of failures, pauses and probes is exact.
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/flaky"), max_in_flight=1)
    breaker = {
        "HERALD_BREAKER_FAILURES": "3",
        "HERALD_BREAKER_COOLDOWN_SECONDS": "1",
        "HERALD_MAX_ATTEMPTS": "30",
        "HERALD_RETRY_SCHEDULE": "0.1",
    }
    with running_worker(stack, tmp_path / "worker.log", **breaker):
        ids = await post_deliveries(client, tenant, endpoint["id"], 6)
        shown: list[dict[str, Any]] = []

        async def circuit_open() -> bool:
            response = await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)
            shown.append(response.json())
            # Seen while its cool-down is still running (on a slow machine the first look may
            # come after it, when an ended pause is no longer shown).
            return bool(shown[-1]["circuit"] == "open" and shown[-1]["pause_reason"])

        await until(circuit_open, timeout=10, every=0.02)
        opened = shown[-1]

        async def all_delivered() -> bool:
            return set((await states(engine, ids)).values()) == {"succeeded"}

        await until(all_delivered, timeout=30)
        closed = (await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)).json()

    times = [r.at for r in receiver.on("/flaky")]
    assert opened["circuit"] == "open" and "consecutive failures" in opened["pause_reason"]
    # Open after the 3rd failure: 1 s of silence, then one probe (it fails), then 2 s of silence
    # (the cool-down doubles), then a probe that succeeds and the rest flows.
    assert times[3] - times[2] >= 1.0
    assert times[4] - times[3] >= 2.0
    assert closed["circuit"] == "closed" and closed["consecutive_failures"] == 0
    assert closed["paused_until"] is None


async def test_no_success_for_the_window_disables_and_reenabling_resumes(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    receiver.script("/down", *[Reply(503)] * 1000)
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/down"))
    window = {
        "HERALD_DISABLE_AFTER_HOURS": str(1.5 / 3600),  # 1.5 s
        "HERALD_BREAKER_FAILURES": "1000",
        "HERALD_MAX_ATTEMPTS": "1000",
        "HERALD_RETRY_SCHEDULE": "0.2",
    }
    with running_worker(stack, tmp_path / "worker.log", **window):
        ids = await post_deliveries(client, tenant, endpoint["id"], 3)

        async def disabled() -> bool:
            body = (await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)).json()
            return body["enabled"] is False

        await until(disabled, timeout=30)

        async def all_dead() -> bool:
            return set((await states(engine, ids)).values()) == {"dead"}

        await until(all_dead, timeout=30)
        shown = (await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)).json()
        async with engine.connect() as connection:
            reasons = set(
                (
                    await connection.execute(
                        text("SELECT dead_reason FROM deliveries WHERE id = ANY(:ids)"),
                        {"ids": ids},
                    )
                ).scalars()
            )

        receiver.unscript("/down")  # the receiver is back
        enabled = await client.patch(
            f"/v1/endpoints/{endpoint['id']}", json={"enabled": True}, headers=tenant
        )
        assert enabled.status_code == 200 and enabled.json()["enabled"] is True
        for delivery_id in ids:
            redriven = await client.post(f"/v1/deliveries/{delivery_id}/redrive", headers=tenant)
            assert redriven.status_code == 202
        [fresh] = await post_deliveries(client, tenant, endpoint["id"], 1)

        async def all_delivered() -> bool:
            return set((await states(engine, [*ids, fresh])).values()) == {"succeeded"}

        await until(all_delivered, timeout=30)

    assert "no successful delivery" in shown["disabled_reason"]
    assert reasons == {"endpoint_disabled"}


async def _park(engine: AsyncEngine, tenant_id: str, endpoint_id: str, count: int) -> None:
    """Insert ``count`` accepted deliveries (event and delivery each, and their destination's
    outbox wake-up, as a batch writes them) in one go."""
    events = [new_id("evt") for _ in range(count)]
    deliveries = [new_id("dlv") for _ in range(count)]
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO events (id, tenant_id, event_type, payload)"
                " SELECT unnest(CAST(:events AS text[])), :tenant, 'bulk', '\\x7b7d'::bytea"
            ),
            {"events": events, "tenant": tenant_id},
        )
        await connection.execute(
            text(
                "INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_type,"
                " region, state, next_attempt_at)"
                " SELECT d, :tenant, :endpoint, e, 'bulk', 'local', 'pending', now()"
                " FROM unnest(CAST(:deliveries AS text[]), CAST(:events AS text[])) AS t(d, e)"
            ),
            {
                "deliveries": deliveries,
                "events": events,
                "tenant": tenant_id,
                "endpoint": endpoint_id,
            },
        )
        await connection.execute(
            text(
                "INSERT INTO outbox_wakeups (region, tenant_id, endpoint_id, run_at, created_at)"
                " VALUES ('local', :tenant, :endpoint, now(), now() - interval '1 minute')"
            ),
            {"tenant": tenant_id, "endpoint": endpoint_id},
        )


async def test_a_paused_destinations_backlog_does_not_slow_a_healthy_one(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    healthy = await new_endpoint(client, tenant, url=receiver.url("/healthy"))
    paused = await new_endpoint(client, tenant, url=receiver.url("/paused"))
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE endpoints SET paused_until = now() + interval '10 minutes',"
                " pause_reason = 'test' WHERE id = :e"
            ),
            {"e": paused["id"]},
        )
        tenant_id = (
            await connection.execute(
                text("SELECT tenant_id FROM endpoints WHERE id = :e"), {"e": paused["id"]}
            )
        ).scalar_one()
    with running_worker(stack, tmp_path / "worker.log", HERALD_WORKER_CONCURRENCY="100"):
        await _park(engine, tenant_id, paused["id"], 10_000)

        async def all_parked() -> bool:
            return await count_rows(engine, "outbox_wakeups") == 0

        await until(all_parked, timeout=120)
        # Healthy work accepted after the whole backlog was queued still goes through. (How
        # much the backlog costs the healthy destination in latency is a benchmark figure:
        # bench/idle_latency.py --beside-paused, run by `make bench`.)
        healthy_ids = await post_deliveries(client, tenant, healthy["id"], 20)
        await receiver.wait_for("/healthy", 20, timeout=120)

    assert receiver.on("/paused") == []
    assert await count_rows(engine, "attempts", "endpoint_id = :e", e=paused["id"]) == 0
    assert set((await states(engine, healthy_ids)).values()) == {"succeeded"}
    assert (
        await count_rows(
            engine, "deliveries", "endpoint_id = :e AND state = 'succeeded'", e=paused["id"]
        )
        == 0
    )
