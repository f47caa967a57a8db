"""The pump holds each step of an attempt to a bound of its own
(app/engine/service/deadlines.py), so that a database that stops answering cannot hold up a
taker or a stopping worker: a taker is free again, a record gives up with its lease."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine
from structlog.testing import capture_logs

from app.core.config import Settings
from app.core.db import create_engine
from tests.fixtures.api import one_delivery
from tests.fixtures.database import stalled_statements
from tests.fixtures.engine import pump
from tests.fixtures.receiver import Receiver
from tests.fixtures.stack import Stack
from tests.fixtures.waiting import count_rows, delivery_row, until

# Generous: a step that has not ended after this is held up by a statement, not by a slow
# machine.
NEVER = 60.0
SHORT_LEASE = {"request_timeout_seconds": 0.5, "lease_seconds": 3.0}


@asynccontextmanager
async def patient_engine(stack: Stack) -> AsyncIterator[AsyncEngine]:
    """The worker's engine, except that the driver waits for a statement as long as it takes
    (no command timeout): only the pump's own bounds can end a wait."""
    engine = create_engine(stack.database_url, pool_size=5)

    @event.listens_for(engine.sync_engine, "do_connect")
    def _no_command_timeout(dialect: Any, record: Any, args: Any, params: Any) -> None:
        params["command_timeout"] = None

    try:
        yield engine
    finally:
        await engine.dispose()


async def backed_off(logs: Sequence[Mapping[str, Any]], error: str) -> bool:
    """Whether a pump's taker backed off after ``error`` (captured log events)."""
    return any(e["event"] == "pump.backoff" and e["error"] == error for e in logs)


async def test_a_claim_the_database_never_answers_frees_the_taker_to_take_again(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    stack: Stack,
    engine: AsyncEngine,
) -> None:
    delivery_id, _ = await one_delivery(client, tenant, engine, receiver.url("/c"))
    with capture_logs() as logs:
        async with (
            patient_engine(stack) as patient,
            pump(settings, patient) as (running, _),
            stalled_statements(engine, "leased"),  # the claim waits
        ):
            running.start()
            # A passing error: the taker backs off and takes again (the destination comes due
            # again when its hold ends), free meanwhile.
            await until(lambda: backed_off(logs, "TimeoutError"), timeout=NEVER)
            # Asked while the statement is still held: once it is let go, the destination is
            # served again.
            await nothing_claimed_or_sent(receiver, engine, delivery_id)


async def nothing_claimed_or_sent(
    receiver: Receiver, engine: AsyncEngine, delivery_id: str
) -> None:
    assert receiver.on("/c") == []
    row = await delivery_row(engine, delivery_id)
    assert row["state"] == "pending" and row["attempt_count"] == 0  # the claim was cancelled


async def test_recording_ends_with_the_lease_even_while_a_statement_waits(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    stack: Stack,
    engine: AsyncEngine,
) -> None:
    delivery_id, _ = await one_delivery(client, tenant, engine, receiver.url("/r"))
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
            # Never recorded; its lease ran out, so it may be sent again meanwhile (the next
            # claim takes the lease over), always with the same key.
            row = await delivery_row(engine, delivery_id)
            assert row["state"] == "leased" and await count_rows(engine, "attempts") == 0
            sent = receiver.on("/r")
            assert sent and {r.headers["webhook-id"] for r in sent} == {delivery_id}
