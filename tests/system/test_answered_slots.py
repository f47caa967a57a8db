"""A success stops holding its destination's in-flight slot as soon as it is answered, not when
its record commits; a failure holds it until its record has judged the destination. Shown with
the first delivery's record held back by a lock on its row, at a ceiling of one in flight."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.fixtures.api import new_endpoint, post_deliveries
from tests.fixtures.engine import pump
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.waiting import delivery_row, wait_state

PATIENT = {"request_timeout_seconds": 30, "lease_seconds": 60}


@asynccontextmanager
async def record_held(engine: AsyncEngine, delivery_id: str) -> AsyncIterator[None]:
    """The delivery's row locked, as a long transaction would hold it: its record waits."""
    async with engine.connect() as connection, connection.begin():
        await connection.execute(
            text("SELECT 1 FROM deliveries WHERE id = :id FOR UPDATE"), {"id": delivery_id}
        )
        yield


async def test_a_success_frees_its_slot_before_its_record_commits(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    answer = asyncio.Event()
    receiver.script("/one", Reply(200, hold=answer), Reply(200))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/one"), max_in_flight=1)
    ids = await post_deliveries(client, tenant, endpoint["id"], 2)
    async with pump(settings, engine, **PATIENT) as (worker, _):
        worker.start()
        [first_request] = await receiver.wait_for("/one", 1)
        first = first_request.headers["webhook-id"]
        [second] = [i for i in ids if i != first]
        async with record_held(engine, first):
            answer.set()
            # The second is sent while the first's record still waits for the lock.
            await receiver.wait_for("/one", 2)
            assert (await delivery_row(engine, first))["state"] == "leased"
        await wait_state(engine, first, "succeeded")
        await wait_state(engine, second, "succeeded")
    assert receiver.max_in_flight == 1


async def test_a_failure_holds_its_slot_until_its_record_has_judged_the_destination(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    answer = asyncio.Event()
    receiver.script("/two", Reply(503, hold=answer), Reply(200), Reply(200))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/two"), max_in_flight=1)
    ids = await post_deliveries(client, tenant, endpoint["id"], 2)
    async with pump(settings, engine, **PATIENT) as (worker, _):
        worker.start()
        [first_request] = await receiver.wait_for("/two", 1)
        first = first_request.headers["webhook-id"]
        [second] = [i for i in ids if i != first]
        async with record_held(engine, first):
            answer.set()
            with_lock = asyncio.create_task(receiver.wait_for("/two", 2, timeout=60))
            # Nothing else may start while the failure's record waits: its slot is held.
            done, _ = await asyncio.wait({with_lock}, timeout=1.0)
            assert not done, "a request started before the failure was recorded"
        await with_lock  # the record committed, the slot freed: the next one goes
        await wait_state(engine, second, "succeeded")
    assert receiver.max_in_flight == 1
