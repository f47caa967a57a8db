"""Fairness: a destination with a deep backlog and a slow receiver, or a tenant with
many such destinations, does not delay others beyond their own ceilings. Asserted on the order
in which a real receiver saw the requests, never on times."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.fixtures.api import new_endpoint, new_tenant, post_deliveries
from tests.fixtures.processes import running_worker
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.stack import Stack


def arrival_order(receiver: Receiver) -> list[str]:
    return [r.path for r in receiver.requests]


async def test_a_slow_backlog_does_not_hold_back_a_healthy_destination(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    tmp_path: Path,
) -> None:
    receiver.script("/slow", *[Reply(delay=0.5)] * 100)
    slow = await new_endpoint(client, tenant, url=receiver.url("/slow"), max_in_flight=5)
    healthy = await new_endpoint(client, tenant, url=receiver.url("/healthy"))
    # The backlog is older: a first-in, first-out queue would serve all of it first.
    await post_deliveries(client, tenant, slow["id"], 100)
    await post_deliveries(client, tenant, healthy["id"], 20)
    with running_worker(stack, tmp_path / "worker.log"):
        await receiver.wait_for("/healthy", 20, timeout=60)
    order = arrival_order(receiver)
    slow_seen_first = order[: order.index("/healthy")].count("/slow")
    last_healthy = max(i for i, path in enumerate(order) if path == "/healthy")
    # The slow destination held its 5 slots; everything healthy went past it, not after it.
    assert slow_seen_first <= 5
    assert order[:last_healthy].count("/slow") < 30


async def test_a_tenant_with_many_slow_destinations_leaves_room_for_another(
    client: httpx.AsyncClient, receiver: Receiver, stack: Stack, tmp_path: Path
) -> None:
    hog, other = await new_tenant(client, "hog"), await new_tenant(client, "other")
    for n in range(10):
        receiver.script(f"/hog{n}", *[Reply(delay=1.0)] * 10)
        endpoint = await new_endpoint(client, hog, url=receiver.url(f"/hog{n}"))
        await post_deliveries(client, hog, endpoint["id"], 10)
    quick = await new_endpoint(client, other, url=receiver.url("/quick"))
    await post_deliveries(client, other, quick["id"], 10)
    # 20 units of capacity in the worker (FAST_WORKER_ENV): without a tenant's share, the hog's
    # first two destinations would fill them all for a second.
    with running_worker(stack, tmp_path / "worker.log"):
        await receiver.wait_for("/quick", 10, timeout=60)
    order = arrival_order(receiver)
    last_quick = max(i for i, path in enumerate(order) if path == "/quick")
    hog_before = sum(1 for path in order[:last_quick] if path.startswith("/hog"))
    # At most half the worker's capacity went to the hog before the other tenant was served.
    assert hog_before <= 10


async def test_a_worker_of_concurrency_one_serves_every_tenant(
    client: httpx.AsyncClient, receiver: Receiver, stack: Stack, tmp_path: Path
) -> None:
    # Two tenants, each with two due destinations: a tenant's share of a one-unit worker must
    # still be one, or every take is refused for the other tenant's sake and nothing is sent.
    for name in ("first", "second"):
        headers = await new_tenant(client, name)
        for n in range(2):
            endpoint = await new_endpoint(client, headers, url=receiver.url(f"/{name}{n}"))
            await post_deliveries(client, headers, endpoint["id"], 2)
    with running_worker(stack, tmp_path / "worker.log", HERALD_WORKER_CONCURRENCY="1") as worker:
        for name in ("first", "second"):
            for n in range(2):
                await receiver.wait_for(f"/{name}{n}", 2, timeout=60)
    assert len(receiver.requests) == 8
    assert receiver.max_in_flight == 1
    assert not worker.events("pump.take_failed")
