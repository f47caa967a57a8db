"""What a delivery costs the PostgreSQL primary, from its accept to a succeeded attempt: the
rows written to each table and the WAL, through a real API and a real worker.

The bounds are today's costs, with room only where a race decides (whether the API's publish mark
or the worker's claim reaches a single delivery first; when a retry comes due): a change that
writes more fails here, and a change that writes less lowers them. Measured on this
suite's PostgreSQL, per delivery: one at a time 7.2 rows and ~3.9 KB of WAL (8.2 and ~4.4 KB
keyed), batched 8.0 and ~4.9 KB, fanned out to four endpoints 7.2 and ~4.0 KB, retried once
11.0 and ~6.6 KB. A delivery's row is written up to four times (accept, publish mark, claim,
record; no mark when the claim came first), its outbox row twice (insert, publish mark)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import accept, fast_path_settled, new_endpoint
from tests.fixtures.processes import HeraldProcess
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.waiting import count_rows, eventually
from tests.fixtures.write_costs import Writes, counting_writes

DELIVERIES = 20


async def _cost(
    engine: AsyncEngine, deliveries: int, work: Callable[[], Awaitable[None]]
) -> Writes:
    """What ``work`` wrote, once its ``deliveries`` succeeded and every publish was marked."""
    async with counting_writes(engine) as counter:
        await work()
        await eventually(
            lambda: count_rows(engine, "deliveries", "state = 'succeeded'"),
            lambda count: count == deliveries,
        )
        await fast_path_settled(engine)
        return await counter.since_mark()


async def test_a_single_delivery_writes_at_most_eight_rows_nine_with_a_key(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    engine: AsyncEngine,
    worker: HeraldProcess,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/hook"))

    async def accepts(keyed: bool) -> None:
        for _ in range(DELIVERIES):
            key = {"Idempotency-Key": uuid.uuid4().hex} if keyed else {}
            await accept(client, {**tenant, **key}, endpoint["id"])

    unkeyed = await _cost(engine, DELIVERIES, lambda: accepts(keyed=False))
    print("single, unkeyed:", unkeyed.per(DELIVERIES))
    assert unkeyed.of("events") == unkeyed.of("attempts") == DELIVERIES, unkeyed
    assert unkeyed.total <= 8 * DELIVERIES, unkeyed.per(DELIVERIES)
    assert unkeyed.wal_bytes > 0

    keyed = await _cost(engine, 2 * DELIVERIES, lambda: accepts(keyed=True))
    print("single, keyed:", keyed.per(DELIVERIES))
    assert keyed.of("idempotency_keys") == DELIVERIES, keyed
    assert keyed.total <= 9 * DELIVERIES, keyed.per(DELIVERIES)


async def test_a_batched_delivery_writes_at_most_eight_rows(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    engine: AsyncEngine,
    worker: HeraldProcess,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/hook"))
    items = [{"endpoint_id": endpoint["id"], "event_type": "a.b", "payload": {"n": n}}
             for n in range(100)]  # fmt: skip

    async def batch() -> None:
        answer = await client.post("/v1/deliveries/batch", json={"items": items}, headers=tenant)
        assert answer.status_code == 200 and answer.json()["accepted"] == len(items)

    batched = await _cost(engine, len(items), batch)
    print("batch of 100:", batched.per(len(items)))
    assert batched.of("events") == batched.of("attempts") == len(items), batched
    assert batched.total <= 8 * len(items), batched.per(len(items))


async def test_a_fanned_out_delivery_writes_at_most_eight_rows(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    engine: AsyncEngine,
    worker: HeraldProcess,
) -> None:
    for n in range(4):
        await new_endpoint(client, tenant, url=receiver.url(f"/hook/{n}"), event_types=["a.b"])
    events = 5

    async def publish() -> None:
        for n in range(events):
            answer = await client.post(
                "/v1/events", json={"event_type": "a.b", "payload": {"n": n}}, headers=tenant
            )
            assert answer.status_code == 202

    fanned = await _cost(engine, 4 * events, publish)
    print("an event to 4 endpoints:", fanned.per(4 * events))
    assert fanned.of("events") == events and fanned.of("attempts") == 4 * events, fanned
    assert fanned.total <= 8 * 4 * events, fanned.per(4 * events)


async def test_a_retried_delivery_adds_its_attempt_and_its_record(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    engine: AsyncEngine,
    worker: HeraldProcess,
) -> None:
    # An endpoint each, each answering its first request 500: one path's script would hand a
    # delivery's retry the 500 meant for a later delivery's first attempt.
    endpoints = []
    for n in range(DELIVERIES):
        endpoints.append(await new_endpoint(client, tenant, url=receiver.url(f"/hook/{n}")))
        receiver.script(f"/hook/{n}", Reply(status=500))

    async def accepts() -> None:
        for endpoint in endpoints:
            await accept(client, tenant, endpoint["id"])

    retried = await _cost(engine, DELIVERIES, accepts)
    print("single, retried once:", retried.per(DELIVERIES))
    assert retried.of("attempts") == 2 * DELIVERIES, retried
    assert retried.total <= 12 * DELIVERIES, retried.per(DELIVERIES)
