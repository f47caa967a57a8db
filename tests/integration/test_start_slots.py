"""A rate-limited start keeps to its window: it begins no earlier than its slot and
no later than the grant's allowance after it, or it is given back unsent -- never sent on top
of the next start. The pump runs in this process; the test stops the whole process at the
first arrival, as a stall would stop a worker, and looks at what reached the receiver."""

from __future__ import annotations

import time

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.flow.service.rates import late_start_allowed, start_burst
from tests.fixtures.api import fast_path_settled, new_endpoint, post_deliveries
from tests.fixtures.engine import pump
from tests.fixtures.receiver import Received, Receiver
from tests.fixtures.waiting import count_rows

RATE = 5  # starts 0.2 s apart, each allowed to begin up to 0.1 s after its slot
INTERVAL = 1 / RATE


async def test_a_start_held_up_past_its_window_is_given_back_not_sent_on_the_next(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    assert late_start_allowed(INTERVAL) < 0.75 * INTERVAL

    def stall_once(received: Received) -> None:
        # Blocks the event loop -- the pump's with it -- from start 0 until start 1's slot is
        # 0.75 interval past: later than its allowance, earlier than the next slot.
        receiver.on_arrival = None
        time.sleep(1.75 * INTERVAL)

    receiver.on_arrival = stall_once
    endpoint = await new_endpoint(
        client, tenant, url=receiver.url("/slots"), rate_limit_per_second=RATE, max_in_flight=10
    )
    ids = await post_deliveries(client, tenant, endpoint["id"], 3)
    await fast_path_settled(engine)  # no publish mark holds a row locked: one claim takes all
    async with pump(settings, engine) as (running, _):
        running.start()  # one grant for all three: starts at 0, 0.2 and 0.4 s
        arrivals = await receiver.wait_for("/slots", 3)

    # The held-up start went after the next one, in a slot of its own, instead of on top of it;
    # given back uncounted, it was still attempted once.
    assert [r.headers["webhook-id"] for r in arrivals] == [ids[0], ids[2], ids[1]]
    assert receiver.beyond_rate_bound("/slots", INTERVAL, start_burst(INTERVAL)) <= 0
    assert await count_rows(engine, "attempts") == 3
    assert await count_rows(engine, "deliveries", "attempt_count <> 1") == 0
