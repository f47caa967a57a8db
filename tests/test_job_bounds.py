"""A delivery job holds each of its steps to a bound of its own, so arq's job timeout (their
sum, workers/runner.py) is never reached and a stopping worker is never held up for long: a
database that stops answering cannot keep a job running. The wake-up engine's pump holds the
same steps to the same bounds: a taker is free again, a record gives up with its lease."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine
from structlog.testing import capture_logs

from app.config import Settings
from app.db import create_engine
from tests.receiver import Receiver, Reply
from tests.support import (
    Stack,
    count_rows,
    delivery_row,
    dispatcher,
    fast_path_settled,
    new_endpoint,
    post_deliveries,
    pump,
    queued_jobs,
    stalled_statements,
    until,
    wakeups_suite,
)

# Generous: a job that has not ended after this is held up by a statement, not by a slow machine.
NEVER = 60.0
SHORT_LEASE = {"request_timeout_seconds": 0.5, "lease_seconds": 3.0}


@asynccontextmanager
async def patient_engine(stack: Stack) -> AsyncIterator[AsyncEngine]:
    """The worker's engine, except that the driver waits for a statement as long as it takes
    (no command timeout): only the dispatcher's own bounds can end a wait."""
    engine = create_engine(stack.database_url, pool_size=5)

    @event.listens_for(engine.sync_engine, "do_connect")
    def _no_command_timeout(dialect: Any, record: Any, args: Any, params: Any) -> None:
        params["command_timeout"] = None

    try:
        yield engine
    finally:
        await engine.dispose()


async def ended(job: Awaitable[None]) -> BaseException | None:
    """Run the job while a statement is held; what it raised, if anything, once it ended."""
    task = asyncio.ensure_future(job)
    await asyncio.wait({task}, timeout=NEVER)
    assert task.done(), "the job was still waiting for the database"
    return task.exception()


async def backed_off(logs: Sequence[Mapping[str, Any]], error: str) -> bool:
    """Whether a pump's taker backed off after ``error`` (captured log events)."""
    return any(e["event"] == "pump.backoff" and e["error"] == error for e in logs)


async def one_delivery(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine, url: str
) -> tuple[str, str]:
    endpoint = await new_endpoint(client, tenant, url=url)
    [delivery_id] = await post_deliveries(client, tenant, endpoint["id"], 1)
    await fast_path_settled(engine)
    return delivery_id, endpoint["id"]


async def test_a_claim_the_database_never_answers_ends_the_job_to_run_again(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    stack: Stack,
    engine: AsyncEngine,
) -> None:
    delivery_id, endpoint_id = await one_delivery(client, tenant, engine, receiver.url("/c"))
    if wakeups_suite():
        with capture_logs() as logs:
            async with (
                patient_engine(stack) as patient,
                pump(settings, patient) as (running, _),
                stalled_statements(engine, "leased"),  # the claim waits
            ):
                running.start()
                # A passing error: the taker backs off and takes again (the destination
                # comes due again when its hold ends), free meanwhile.
                await until(lambda: backed_off(logs, "TimeoutError"), timeout=NEVER)
                # Asked while the statement is still held: once it is let go, the destination
                # is served again.
                await nothing_claimed_or_sent(receiver, engine, delivery_id)
        return
    async with (
        patient_engine(stack) as patient,
        dispatcher(settings, patient) as worker,
        stalled_statements(engine, "leased"),  # the claim waits
    ):
        raised = await ended(worker.deliver(delivery_id, endpoint_id))
    # A passing error: workers/deliver.py has arq run the job again, with backoff.
    assert isinstance(raised, TimeoutError)
    await nothing_claimed_or_sent(receiver, engine, delivery_id)


async def nothing_claimed_or_sent(
    receiver: Receiver, engine: AsyncEngine, delivery_id: str
) -> None:
    assert receiver.on("/c") == []
    row = await delivery_row(engine, delivery_id)
    assert row["state"] == "enqueued" and row["attempt_count"] == 0  # the claim was cancelled


async def test_recording_ends_with_the_lease_even_while_a_statement_waits(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    stack: Stack,
    engine: AsyncEngine,
) -> None:
    delivery_id, endpoint_id = await one_delivery(client, tenant, engine, receiver.url("/r"))
    if wakeups_suite():
        with capture_logs() as logs:
            async with (
                patient_engine(stack) as patient,
                pump(settings, patient, **SHORT_LEASE) as (running, _),
                stalled_statements(engine, "succeeded"),  # the record waits
            ):
                running.start()

                async def gave_up() -> bool:
                    return any(e["event"] == "delivery.record_failed" for e in logs)

                await until(gave_up, timeout=NEVER)
                # Never recorded; its lease ran out, so it may be sent again meanwhile (the
                # next claim takes the lease over), always with the same key.
                row = await delivery_row(engine, delivery_id)
                assert row["state"] == "leased" and await count_rows(engine, "attempts") == 0
                sent = receiver.on("/r")
                assert sent and {r.headers["webhook-id"] for r in sent} == {delivery_id}
        return
    async with (
        patient_engine(stack) as patient,
        dispatcher(settings, patient, **SHORT_LEASE) as worker,
        stalled_statements(engine, "succeeded"),  # the record waits
    ):
        raised = await ended(worker.deliver(delivery_id, endpoint_id))
    assert isinstance(raised, TimeoutError)
    assert len(receiver.on("/r")) == 1
    # Never recorded: once the lease has run out it is sent again, with the same key.
    row = await delivery_row(engine, delivery_id)
    assert row["state"] == "leased" and await count_rows(engine, "attempts") == 0


async def test_a_retry_the_database_will_not_mark_leaves_the_job_on_time(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    stack: Stack,
    engine: AsyncEngine,
) -> None:
    receiver.script("/s", Reply(500))
    delivery_id, endpoint_id = await one_delivery(client, tenant, engine, receiver.url("/s"))
    async with (
        patient_engine(stack) as patient,
        dispatcher(settings, patient) as worker,
        stalled_statements(engine, "enqueued"),  # marking the retry's job as queued waits
    ):
        raised = await ended(worker.deliver(delivery_id, endpoint_id))
    # Best effort after the record: the job ends well, the attempt is on record, and the retry
    # is due by the row (and queued: its job was published before the mark).
    assert raised is None
    row = await delivery_row(engine, delivery_id)
    assert row["state"] == "pending" and row["last_status_code"] == 500
    assert f"{delivery_id}:r1" in await queued_jobs(settings, delivery_id)
