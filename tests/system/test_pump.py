"""The delivery pump end to end: a real `herald worker` and an API that arms destinations,
against a receiver on 127.0.0.1.

What it promises is measured here in counts: rows claimed per statement, claims per
delivery behind a ceiling, and Redis entries left behind -- never in time."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.queue import create_queue_redis
from app.flow.service.wakeups import Wakeups
from tests.fixtures.api import fast_path_settled, new_endpoint, post_deliveries
from tests.fixtures.database import row_locked
from tests.fixtures.engine import pump
from tests.fixtures.observed import sample
from tests.fixtures.processes import free_port, running_worker
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.recovery import states, transitions
from tests.fixtures.stack import Stack
from tests.fixtures.waiting import count_rows, delivery_row, eventually, until, wait_state

LOCKED_FOR = 3.0


async def all_finished(
    engine: AsyncEngine, ids: list[str], timeout: float = 60.0
) -> dict[str, str]:
    return await eventually(
        lambda: states(engine, ids),
        lambda now: set(now.values()) <= {"succeeded", "dead"},
        timeout=timeout,
    )


async def scrape(port: int) -> str:
    async with httpx.AsyncClient() as http:
        return (await http.get(f"http://127.0.0.1:{port}/metrics")).text


async def wake_entries(settings: Settings) -> int:
    redis = create_queue_redis(str(settings.redis_url), region=settings.region)
    try:
        return await Wakeups(redis, settings.region).count_entries()
    finally:
        await redis.aclose()


async def test_a_backlog_is_claimed_in_batches_and_each_delivery_sent_once(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    settings: Settings,
    tmp_path: Path,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/batch"))
    # Accepted before any worker runs: the destination's one wake-up covers all of them.
    ids = await post_deliveries(client, tenant, endpoint["id"], 60)
    assert await wake_entries(settings) == 1
    port = free_port()
    with running_worker(stack, tmp_path / "worker.log", HERALD_WORKER_METRICS_PORT=str(port)):
        await receiver.wait_for("/batch", 60)
        assert set((await all_finished(engine, ids)).values()) == {"succeeded"}
        body = await scrape(port)

        # Nothing live is left, so the destination's entry goes too (at the latest when the
        # last batch's lease-end wake-up finds nothing to claim).
        async def no_entry_left() -> bool:
            return await wake_entries(settings) == 0

        await until(no_entry_left, timeout=30)

    keys = [r.headers["webhook-id"] for r in receiver.on("/batch")]
    assert sorted(keys) == sorted(ids)  # every delivery once, under its own id
    assert sample(body, "herald_claimed_rows_total") == 60
    # 60 due rows and 20 units of worker capacity: claims take many rows each.
    assert sample(body, "herald_claims_total") <= 60 - 20 + 1


async def test_an_in_flight_ceiling_waits_without_polling(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    receiver.script("/one", *[Reply(delay=0.3)] * 12)
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/one"), max_in_flight=1)
    ids = await post_deliveries(client, tenant, endpoint["id"], 12)
    port = free_port()
    with running_worker(stack, tmp_path / "worker.log", HERALD_WORKER_METRICS_PORT=str(port)):
        assert set((await all_finished(engine, ids)).values()) == {"succeeded"}
        body = await scrape(port)

    assert receiver.max_in_flight == 1
    # Bounded by the deliveries, not by how long they waited: a freed slot wakes the
    # destination once (a polling engine would claim and defer hundreds of times a second).
    claims = sample(body, "herald_claims_total")
    assert 12 <= claims <= 2 * 12 + 2
    deferrals = sum(
        s.value
        for family in text_string_to_metric_families(body)
        if family.name == "herald_flow_deferrals"
        for s in family.samples
        if s.name.endswith("_total")
    )
    assert deferrals <= 12


async def test_a_due_delivery_locked_by_another_transaction_is_not_claimed_in_a_loop(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/locked"))
    [delivery_id] = await post_deliveries(client, tenant, endpoint["id"], 1)
    await fast_path_settled(engine)
    claims = REGISTRY.get_sample_value("herald_claims_total") or 0.0
    async with pump(settings, engine) as (running, _):
        # A claim skips a row another transaction holds locked (a publish mark, another
        # claim): it is due, yet this claim cannot take it.
        async with row_locked(engine, delivery_id):
            running.start()
            await asyncio.sleep(LOCKED_FOR)
            during = (REGISTRY.get_sample_value("herald_claims_total") or 0.0) - claims
        await wait_state(engine, delivery_id, "succeeded")

    # Looked at again after growing pauses, not claimed again and again while the lock lasts:
    # the pauses (at least 5 ms, doubling, at most 1 s) leave room for ten claims in 3 s.
    assert 1 <= during <= 12
    assert [r.headers["webhook-id"] for r in receiver.on("/locked")] == [delivery_id]


async def test_a_retry_is_recorded_enqueued_and_woken_at_its_time_by_its_record(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    receiver.script("/again", Reply(500), Reply(200))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/again"))
    [delivery_id] = await post_deliveries(client, tenant, endpoint["id"], 1)
    await fast_path_settled(engine)
    # The claim settles the destination for its lease's end (two minutes on): only the
    # record's own arm, for the retry's time, can bring the retry sooner.
    async with pump(
        settings, engine, retry_schedule=(0.5,), request_timeout_seconds=30.0, lease_seconds=120.0
    ) as (running, _):
        running.start()
        await wait_state(engine, delivery_id, "succeeded", timeout=60)

    assert [r.headers["webhook-id"] for r in receiver.on("/again")] == [delivery_id] * 2
    assert (await delivery_row(engine, delivery_id))["attempt_count"] == 2
    # Written `enqueued` by the record itself: no second write marks the retry as queued (nor
    # the first attempt: the publish writes no delivery row).
    assert await transitions(engine, delivery_id) == [
        ("pending", "leased"),
        ("leased", "enqueued"),
        ("enqueued", "leased"),
        ("leased", "succeeded"),
    ]
    assert await count_rows(engine, "reconcile_runs") == 0
