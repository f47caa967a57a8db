"""A start-rate ceiling holds at the receiver: two real workers claim in batches
for one rate-limited destination, and the receiver's own arrival times are counted over every
sliding window -- and so are the starts Herald records for its attempts. The bound is the
gate's: at most floor(R·W + burst) starts in W seconds."""

from __future__ import annotations

import math
from pathlib import Path

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.flow.service.rates import start_burst, start_interval_us
from tests.fixtures.api import new_endpoint, post_deliveries
from tests.fixtures.processes import running_workers
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.recovery import states
from tests.fixtures.stack import Stack
from tests.fixtures.waiting import count_rows

RATE = 20
DELIVERIES = 300  # 15 s at the ceiling: hundreds of windows
# Windows where R·W is whole, the ones a receiver's own limit counts in: floor(R·W + 1.5) is
# R·W + 1, half an interval short of the next start -- room for the way to the receiver.
WINDOWS = (0.5, 1.0, 2.0, 5.0)
# Generous timeouts: an answer slowed down by a starved machine must not time out and be
# (correctly) sent again, which would be a second arrival this test is not about.
PATIENT = {"HERALD_REQUEST_TIMEOUT_SECONDS": "10", "HERALD_LEASE_SECONDS": "20"}


async def test_a_rate_ceiling_holds_in_every_sliding_window_at_the_receiver(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    # A ceiling the in-flight limit alone would not keep: 5 in flight to a receiver that answers
    # in 100 ms would allow 50 starts a second, so the rate is what binds.
    receiver.script("/rated", *[Reply(200, delay=0.1)] * DELIVERIES)
    endpoint = await new_endpoint(
        client, tenant, url=receiver.url("/rated"), rate_limit_per_second=RATE, max_in_flight=5
    )
    ids = await post_deliveries(client, tenant, endpoint["id"], DELIVERIES)
    async with running_workers(stack, [tmp_path / "a.log", tmp_path / "b.log"], **PATIENT):
        # Waited for without polling: the receiver shares this event loop, and the test's
        # own work must not hold back its clock.
        await receiver.wait_for("/rated", DELIVERIES, timeout=120)

    burst = start_burst(start_interval_us(RATE) / 1e6)
    most = {seconds: receiver.most_starts_within("/rated", seconds) for seconds in WINDOWS}
    bound = {seconds: math.floor(RATE * seconds + burst) for seconds in WINDOWS}
    assert all(most[seconds] <= bound[seconds] for seconds in WINDOWS), (most, bound)
    # What an operator reads: each attempt's recorded start is when its request began, not
    # when it was claimed and began to wait for its slot.
    recorded = await _recorded_starts(engine, endpoint["id"])
    most_recorded = {seconds: most_within(recorded, seconds) for seconds in WINDOWS}
    assert all(most_recorded[s] <= bound[s] for s in WINDOWS), (most_recorded, bound)
    assert most[1.0] >= RATE  # the ceiling was reached: what is counted is the ceiling's work
    assert set((await states(engine, ids)).values()) == {"succeeded"}
    assert await count_rows(engine, "attempts") == DELIVERIES  # each sent once
    assert sorted(r.headers["webhook-id"] for r in receiver.on("/rated")) == sorted(ids)


async def _recorded_starts(engine: AsyncEngine, endpoint_id: str) -> list[float]:
    async with engine.connect() as connection:
        query = text(
            "SELECT extract(epoch FROM started_at) FROM attempts WHERE endpoint_id = :e"
            " ORDER BY started_at"
        )
        return [float(at) for at in (await connection.execute(query, {"e": endpoint_id})).scalars()]


def most_within(times: list[float], seconds: float) -> int:
    """The most of ``times`` (sorted) within ``seconds`` of the first of them, both ends
    counted: the fullest window of that length."""
    most, first = 0, 0
    for last, at in enumerate(times):
        while at - times[first] > seconds:
            first += 1
        most = max(most, last - first + 1)
    return most
