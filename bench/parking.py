"""Work held back by policy, which should cost nothing while it waits: deliveries behind a
destination paused by its receiver (`429 Retry-After: 3600`) while cron calls reconcile, and
deliveries behind `max_in_flight: 1` with a receiver that holds the slot 2 s."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench import probes
from bench.load import Client
from bench.stack import ADMIN_KEY, API

RECONCILE_EVERY_SECONDS = 2.0
# The workers' CPU with nothing to do, metered this long: the floor under both figures.
IDLE_SECONDS = 5.0


async def parked(client: Client, deliveries: int, seconds: float) -> dict[str, Any]:
    """Pause a destination by its receiver's 429, queue ``deliveries`` behind it (the one that
    paused it included), then call reconcile every 2 s for ``seconds``, as cron would: what
    Redis, the queue and the outbox hold before and after, and the workers' CPU meanwhile."""
    stack = client.stack
    stack.stop_workers()
    await stack.clean_slate()
    await client.reset_receiver("throttling")
    stack.start_workers()
    idle = await idle_cpu(client)
    endpoint = client.endpoints["throttling"]
    await client.accept_batches("throttling", 1)
    deadline = time.monotonic() + 30
    while (await client.get(f"/v1/endpoints/{endpoint}"))["paused_until"] is None:
        if time.monotonic() > deadline:
            raise RuntimeError("the 429 did not pause the destination within 30 s")
        await asyncio.sleep(0.05)
    await client.accept_batches("throttling", deliveries - 1)
    while await stack.sql("SELECT count(*) FROM outbox_wakeups"):
        await asyncio.sleep(0.1)
    await asyncio.sleep(1)  # every worker has seen the work once
    window = await waiting_window(client, "throttling", seconds)
    stack.stop_workers()
    return {"deliveries": deliveries, "idle_worker_cpu_percent": idle, **window}


async def waiting_window(client: Client, receiver: str, seconds: float) -> dict[str, Any]:
    """Work held back by policy, for ``seconds`` while cron calls reconcile every 2 s: what
    Redis, the queue and the outbox hold before and after, the workers' CPU and what their
    counters say they did meanwhile, and the requests the receiver saw in the window."""
    stack = client.stack
    before = await probes.counts(stack)
    counters = await probes.engine_counters(stack)
    received = (await client.receiver_stats(receiver))["received"]
    meter = probes.CpuMeter(stack.worker_processes())
    started, runs = time.perf_counter(), 0
    while time.perf_counter() - started < seconds:
        async with client.http.post(
            f"{API}/v1/reconcile",
            json={"trigger": "bench"},
            headers={"Authorization": f"Bearer {ADMIN_KEY}"},
        ) as response:
            assert response.status == 202, await response.text()
        runs += 1
        await asyncio.sleep(
            max(0.0, started + runs * RECONCILE_EVERY_SECONDS - time.perf_counter())
        )
    cpu = meter.percent()
    after = await probes.counts(stack)
    counters = probes.counters_delta(await probes.engine_counters(stack), counters)
    return {
        "seconds": seconds,
        "reconcile_runs": runs,
        "before": before.as_dict(),
        "after": after.as_dict(),
        "worker_cpu_percent": cpu,
        "requests_in_window": (await client.receiver_stats(receiver))["received"] - received,
        # What the workers did during the window: waiting work should make them do nothing.
        "engine_counters": counters,
    }


async def in_flight_one(client: Client, deliveries: int) -> dict[str, Any]:
    """``deliveries`` behind `max_in_flight: 1` and a receiver that answers in 2 s: the workers'
    CPU until the last one is answered, and how much of that time the one slot was in use."""
    stack = client.stack
    stack.stop_workers()
    await stack.clean_slate()
    await client.reset_receiver("slot")
    stack.start_workers()
    idle = await idle_cpu(client)
    meter = probes.CpuMeter(stack.worker_processes())
    accepted_at = time.time()
    await client.accept_batches("slot", deliveries)
    await client.wait_received("slot", deliveries)
    stats = await client.wait_answered("slot")
    cpu = meter.percent()
    counters = await probes.engine_counters(stack)
    stack.stop_workers()
    wall = stats["last_end"] - accepted_at
    return {
        "deliveries": deliveries,
        "wall_seconds": wall,
        "busy_seconds": stats["busy_seconds"],
        # Σ request time / wall: 1.0 when the slot is never idle (accept to last answer).
        "slot_utilisation": stats["busy_seconds"] / wall,
        "max_concurrent": stats["max_concurrent"],
        "worker_cpu_percent": cpu,
        "idle_worker_cpu_percent": idle,
        "engine_counters": counters,
    }


async def idle_cpu(client: Client) -> float:
    """The workers' CPU (% of one core) once started, with no work at all."""
    await client.stack.wait_workers_idle()
    meter = probes.CpuMeter(client.stack.worker_processes())
    await asyncio.sleep(IDLE_SECONDS)
    return meter.percent()
