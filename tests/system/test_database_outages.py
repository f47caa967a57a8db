"""A worker meeting a PostgreSQL outage: before its claim, and after a real send."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from sqlalchemy import text

from app.core.config import Settings
from app.main import create_app
from tests.fixtures.api import fast_path_settled, new_endpoint, new_tenant, post_deliveries
from tests.fixtures.processes import running_worker
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.stack import OwnPostgres, client_for
from tests.fixtures.waiting import count_rows, wait_state

PATH = "/outage"


@asynccontextmanager
async def api_on(settings: Settings, own: OwnPostgres) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings.model_copy(update={"database_url": own.stack.database_url}))
    async with app.router.lifespan_context(app), client_for(app) as client:
        yield client


async def accept_one(settings: Settings, own: OwnPostgres, receiver: Receiver) -> str:
    """One delivery to the receiver, its destination already armed in Redis."""
    async with api_on(settings, own) as client:
        tenant = await new_tenant(client, "outage")
        endpoint = await new_endpoint(client, tenant, url=receiver.url(PATH))
        [delivery_id] = await post_deliveries(client, tenant, endpoint["id"], 1)
    await fast_path_settled(own.engine)
    return delivery_id


async def restart(own: OwnPostgres) -> None:
    assert await asyncio.to_thread(own.server.start) == own.stack.database_url
    await own.engine.dispose()  # the test's own pooled connections died with the server


async def test_a_taker_that_meets_a_database_outage_tries_again_and_delivers(
    receiver: Receiver, settings: Settings, own_postgres: OwnPostgres, tmp_path: Path
) -> None:
    delivery_id = await accept_one(settings, own_postgres, receiver)
    await asyncio.to_thread(own_postgres.server.stop)
    # The pump's taker that took its destination fails before the claim (the gate reads the
    # endpoint's limits) and tries again by itself: a passing error, not a failure.
    retry, failure = ("pump.backoff", "pump.take_failed")
    with running_worker(own_postgres.stack, tmp_path / "worker.log") as worker:
        await asyncio.to_thread(worker.wait_for_log, f'"{retry}"')
        await restart(own_postgres)
        # Delivered by the worker itself: no reconcile run brings it back.
        await wait_state(own_postgres.engine, delivery_id, "succeeded", timeout=60)
    assert worker.events(retry)
    assert not worker.events(failure)
    assert len(receiver.on(PATH)) == 1
    assert await count_rows(own_postgres.engine, "reconcile_runs") == 0


# A worker goes on retrying to record a request it sent for as long as its lease lasts: longer
# than a job timeout of the request timeout + 20 s, which would cut that record short.
# The held answer is let go only once the database has stopped, and stopping it can take
# seconds on a loaded machine: the request must not time out meanwhile (it would be `unknown`
# and sent again, correctly, but not what these tests are about).
REQUEST_TIMEOUT = 15.0
SHORT_JOB_TIMEOUT = REQUEST_TIMEOUT + 20
SLOW = {"HERALD_REQUEST_TIMEOUT_SECONDS": str(REQUEST_TIMEOUT), "HERALD_LEASE_SECONDS": "90"}


async def test_a_sent_attempt_is_recorded_through_an_outage_longer_than_a_job_timeout(
    receiver: Receiver, settings: Settings, own_postgres: OwnPostgres, tmp_path: Path
) -> None:
    answer = asyncio.Event()
    receiver.script(PATH, Reply(200, hold=answer))
    delivery_id = await accept_one(settings, own_postgres, receiver)
    with running_worker(own_postgres.stack, tmp_path / "worker.log", **SLOW) as worker:
        [sent] = await receiver.wait_for(PATH, 1)
        # The request is out and its answer held back until the database is gone.
        await asyncio.to_thread(own_postgres.server.stop)
        answer.set()
        await asyncio.to_thread(worker.wait_for_log, "delivery.record_retry")
        # Down for longer than such a job timeout, counted from the send.
        await asyncio.sleep(sent.at + SHORT_JOB_TIMEOUT + 1 - time.monotonic())
        await restart(own_postgres)
        # Recorded by the worker that sent it, before its lease ran out: no resend.
        await wait_state(own_postgres.engine, delivery_id, "succeeded", timeout=40)
    assert len(receiver.on(PATH)) == 1
    assert await count_rows(own_postgres.engine, "attempts", "outcome = 'success'") == 1


async def test_a_retry_after_counts_from_the_answer_not_from_a_late_record(
    receiver: Receiver, settings: Settings, own_postgres: OwnPostgres, tmp_path: Path
) -> None:
    answer = asyncio.Event()
    receiver.script(PATH, Reply(429, headers={"Retry-After": "2"}, hold=answer))
    delivery_id = await accept_one(settings, own_postgres, receiver)
    with running_worker(own_postgres.stack, tmp_path / "worker.log", **SLOW) as worker:
        await receiver.wait_for(PATH, 1)
        await asyncio.to_thread(own_postgres.server.stop)
        answer.set()
        answered = time.monotonic()
        await asyncio.to_thread(worker.wait_for_log, "delivery.record_retry")
        # The database is back only after the pause the receiver asked for has ended.
        await asyncio.sleep(answered + 3 - time.monotonic())
        await restart(own_postgres)
        await wait_state(own_postgres.engine, delivery_id, "succeeded", timeout=40)
    async with own_postgres.engine.connect() as connection:
        paused_until = (
            await connection.execute(
                text(
                    "SELECT e.paused_until FROM endpoints AS e JOIN deliveries AS d"
                    " ON d.endpoint_id = e.id WHERE d.id = :d"
                ),
                {"d": delivery_id},
            )
        ).scalar_one()
    # The 429 was recorded late, and its pause was over by then: nothing to pause any more.
    assert await count_rows(own_postgres.engine, "attempts", "status_code = 429") == 1
    assert paused_until is None
