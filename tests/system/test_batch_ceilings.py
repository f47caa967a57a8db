"""An in-flight ceiling holds when two workers claim in batches: each grant
reserves its slots before its claim, so batches taken side by side by different workers never
add up past the ceiling. Counted at a real receiver, never timed."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import new_endpoint, post_deliveries
from tests.fixtures.processes import running_worker
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.recovery import states
from tests.fixtures.stack import Stack
from tests.fixtures.waiting import count_rows, until

CEILING = 20
DELIVERIES = 300
# Each worker has room for 20 (FAST_WORKER_ENV) and claims up to 100 at a time: together they
# could hold 40 in flight, twice the ceiling. Generous timeouts: an answer slowed down by a
# starved machine must not time out and be (correctly) sent again, which is not this test.
WORKER = {
    "HERALD_REQUEST_TIMEOUT_SECONDS": "10",
    "HERALD_LEASE_SECONDS": "20",
}


async def test_an_in_flight_ceiling_holds_across_two_workers_claiming_in_batches(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    receiver.script("/ceiling", *[Reply(200, delay=0.2)] * DELIVERIES)
    endpoint = await new_endpoint(
        client, tenant, url=receiver.url("/ceiling"), max_in_flight=CEILING
    )
    ids = await post_deliveries(client, tenant, endpoint["id"], DELIVERIES)
    with (
        running_worker(stack, tmp_path / "a.log", **WORKER),
        running_worker(stack, tmp_path / "b.log", **WORKER),
    ):

        async def all_delivered() -> bool:
            return set((await states(engine, ids)).values()) == {"succeeded"}

        await until(all_delivered, timeout=120)

    seen = Counter(r.headers["webhook-id"] for r in receiver.on("/ceiling"))
    assert sorted(seen) == sorted(ids) and set(seen.values()) == {1}  # each once
    assert receiver.max_in_flight <= CEILING
    # The ceiling, not the workers' room, was the binding limit.
    assert receiver.max_in_flight >= 15
    assert await count_rows(engine, "attempts") == DELIVERIES
    assert await count_rows(engine, "deliveries", "attempt_count <> 1") == 0
