"""The fault suite's worker crash points with batches: a worker's pump claims up to
``DELIVERY_BATCH_MAX`` deliveries in one statement, so a worker that dies holds a whole batch.
Recovery must still lose nothing, and cost each delivery at most one extra send: the rows a
crash touches are exactly those the dead worker had claimed."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import new_endpoint, post_deliveries
from tests.fixtures.processes import RECOVERY_ENV, crash_worker, running_worker, wait_crashed
from tests.fixtures.receiver import Receiver
from tests.fixtures.recovery import assert_recovered, reconcile_until_succeeded
from tests.fixtures.stack import Stack

PATH = "/batch-faults"
DELIVERIES = 20
BATCH = 10
BATCHES = {"HERALD_DELIVERY_BATCH_MAX": str(BATCH)}


async def attempt_counts(engine: AsyncEngine) -> dict[str, tuple[str, int]]:
    """Every delivery's (state, claims counted)."""
    async with engine.connect() as connection:
        rows = await connection.execute(text("SELECT id, state, attempt_count FROM deliveries"))
        return {row.id: (row.state, row.attempt_count) for row in rows}


async def crash_at(
    point: str,
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> tuple[list[str], set[str]]:
    """Accept the deliveries, let a worker die at ``point``: (delivery ids, the ids it held
    leased when it died)."""
    endpoint = await new_endpoint(client, tenant, url=receiver.url(PATH))
    ids = await post_deliveries(client, tenant, endpoint["id"], DELIVERIES)
    crashing = crash_worker(stack, tmp_path / "crash.log", point, **BATCHES)
    await wait_crashed(crashing)
    assert f"fault injected at {point}" in crashing.output()
    rows = await attempt_counts(engine)
    return ids, {d for d, (state, _) in rows.items() if state == "leased"}


async def recover(
    client: httpx.AsyncClient, stack: Stack, engine: AsyncEngine, tmp_path: Path, ids: list[str]
) -> None:
    with running_worker(stack, tmp_path / "worker.log", **RECOVERY_ENV, **BATCHES):
        await reconcile_until_succeeded(client, engine, ids)


async def test_a_crash_after_a_batch_claim_costs_that_batch_one_claim_and_no_send(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    ids, crashed = await crash_at(
        "worker.after_claim_before_send", client, tenant, receiver, stack, engine, tmp_path
    )
    # It died holding one whole batch, before sending anything.
    assert len(crashed) == BATCH and receiver.on(PATH) == []

    await recover(client, stack, engine, tmp_path, ids)

    counts = await attempt_counts(engine)
    # The lost claim counts against the budget of exactly the rows it took, and no others.
    assert {d for d, (_, claims) in counts.items() if claims == 2} == crashed
    assert {claims for d, (_, claims) in counts.items() if d not in crashed} == {1}
    await assert_recovered(engine, receiver, PATH, ids, crashes=1)


async def test_a_crash_after_a_send_resends_only_what_the_dead_worker_had_claimed(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    ids, crashed = await crash_at(
        "worker.after_send_before_record", client, tenant, receiver, stack, engine, tmp_path
    )
    sent_by_the_dead = {r.headers["webhook-id"] for r in receiver.on(PATH)}
    # Nothing was recorded: every row it claimed (a batch or more) is still leased.
    assert sent_by_the_dead and sent_by_the_dead <= crashed

    await recover(client, stack, engine, tmp_path, ids)

    seen = Counter(r.headers["webhook-id"] for r in receiver.on(PATH))
    assert max(seen.values()) <= 2
    twice = {d for d, n in seen.items() if n == 2}
    # Resent: what the dead worker had sent (its outcomes were never written), and nothing
    # it had not claimed.
    assert sent_by_the_dead <= twice <= crashed
    await assert_recovered(engine, receiver, PATH, ids, crashes=1)


async def test_a_crash_between_take_and_claim_costs_nothing(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    ids, crashed = await crash_at(
        "worker.after_take_before_claim", client, tenant, receiver, stack, engine, tmp_path
    )
    # It died holding the destination and its grant, but no delivery.
    assert crashed == set() and receiver.on(PATH) == []

    await recover(client, stack, engine, tmp_path, ids)

    assert {claims for _, claims in (await attempt_counts(engine)).values()} == {1}
    # No send was lost or repeated: each arrived exactly once.
    await assert_recovered(engine, receiver, PATH, ids, crashes=0)
