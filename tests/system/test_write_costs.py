"""What a delivery costs the PostgreSQL primary, from its accept to a succeeded attempt: the
rows written to each table and the WAL, through a real API and a real worker.

The counts are exact: a delivery's row is written three times (accept, claim, record), its
event and its attempt once each, and its destination's outbox wake-up is inserted and deleted
once per accepting transaction -- however many deliveries that transaction made for it. The one
write a race decides is left out of the exact counts and bounded alone: a relay's claim of a
wake-up the API's fast path had not published within its head start (a loaded machine). A change
that writes more fails here; one that writes less changes these numbers."""

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


def assert_writes(writes: Writes, deliveries: int, expected: dict[tuple[str, str], int]) -> None:
    """Exactly ``expected`` rows written, but for the relay's claims of late wake-ups: at most
    one each of those inserted."""
    exact = {key: count for key, count in writes.rows.items() if count and key != RELAY_CLAIM}
    assert exact == expected, writes.per(deliveries)
    assert writes.rows[RELAY_CLAIM] <= expected[("outbox_wakeups", "insert")], writes
    assert writes.wal_bytes > 0


RELAY_CLAIM = ("outbox_wakeups", "update")


def single(n: int) -> dict[tuple[str, str], int]:
    """What ``n`` deliveries accepted one at a time write, each attempted once."""
    return {
        ("events", "insert"): n,
        ("deliveries", "insert"): n,
        ("deliveries", "update"): 2 * n,  # the claim and the record
        ("attempts", "insert"): n,
        ("outbox_wakeups", "insert"): n,
        ("outbox_wakeups", "delete"): n,  # the publish mark
    }


async def test_a_single_delivery_writes_seven_rows_eight_with_a_key(
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
    assert_writes(unkeyed, DELIVERIES, single(DELIVERIES))

    keyed = await _cost(engine, 2 * DELIVERIES, lambda: accepts(keyed=True))
    print("single, keyed:", keyed.per(DELIVERIES))
    assert_writes(
        keyed, DELIVERIES, {**single(DELIVERIES), ("idempotency_keys", "insert"): DELIVERIES}
    )


async def test_a_batched_delivery_writes_five_rows_and_its_batch_one_wakeup(
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
    one_wakeup = {("outbox_wakeups", "insert"): 1, ("outbox_wakeups", "delete"): 1}
    assert_writes(batched, len(items), {**single(len(items)), **one_wakeup})


async def test_a_fanned_out_delivery_writes_its_event_once_and_a_wakeup_per_destination(
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
    assert_writes(fanned, 4 * events, {**single(4 * events), ("events", "insert"): events})


async def test_a_retried_delivery_adds_its_attempt_and_its_claim_and_record(
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
    # The retry is armed by its record, after its commit: no outbox wake-up.
    twice = {("deliveries", "update"): 4 * DELIVERIES, ("attempts", "insert"): 2 * DELIVERIES}
    assert_writes(retried, DELIVERIES, {**single(DELIVERIES), **twice})
