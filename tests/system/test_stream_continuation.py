"""A stream continued on the worker that ended its head (app/engine/service/continuing.py):
the record that ends a head leases the next delivery and the worker sends it without a wake-up
or a claim -- in order, each delivery sent once, and within the destination's ceilings."""

from __future__ import annotations

from pathlib import Path

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import new_endpoint
from tests.fixtures.observed import sample
from tests.fixtures.processes import free_port, running_worker
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.stack import Stack
from tests.fixtures.streams import KEY, SEQUENCE, accept_in_order, arrivals_by_stream, in_order
from tests.fixtures.waiting import all_succeeded


async def scrape(port: int) -> str:
    async with httpx.AsyncClient() as http:
        return (await http.get(f"http://127.0.0.1:{port}/metrics")).text


async def test_a_stream_goes_on_from_its_record_each_delivery_once(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/one"), ordering="endpoint")
    ids = [d["id"] for d in await accept_in_order(client, tenant, endpoint["id"], [None] * 20)]
    port = free_port()
    with running_worker(stack, tmp_path / "worker.log", HERALD_WORKER_METRICS_PORT=str(port)):
        await all_succeeded(engine, len(ids))
        body = await scrape(port)

    arrived = receiver.on("/one")
    assert [r.headers["webhook-id"] for r in arrived] == ids  # once each, in stream order
    assert [int(r.headers[SEQUENCE]) for r in arrived] == list(range(1, 21))
    continued = sample(body, "herald_streams_continued_total")
    # Every delivery started once: by a claim, or by the record of the one before it.
    assert sample(body, "herald_claimed_rows_total") + continued == len(ids)
    assert continued >= 1


async def test_continued_streams_keep_to_the_in_flight_ceiling_across_two_workers(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    # Six streams, two slots: each ending carries its slot to its stream's next delivery,
    # while four other streams wait for a slot.
    receiver.script("/two", *[Reply(delay=0.1)] * 24)
    endpoint = await new_endpoint(
        client, tenant, url=receiver.url("/two"), ordering="key", max_in_flight=2
    )
    keys: list[str | None] = [f"k{i % 6}" for i in range(24)]
    ports = [free_port()]
    while len(ports) < 2:
        ports += [port for port in [free_port()] if port not in ports]
    with (
        running_worker(stack, tmp_path / "w1.log", HERALD_WORKER_METRICS_PORT=str(ports[0])),
        running_worker(stack, tmp_path / "w2.log", HERALD_WORKER_METRICS_PORT=str(ports[1])),
    ):
        await accept_in_order(client, tenant, endpoint["id"], keys)
        await all_succeeded(engine, len(keys))
        # Both workers': either may have carried every slot, a loaded machine starting one late.
        bodies = [await scrape(port) for port in ports]

    assert receiver.max_in_flight_on["/two"] == 2  # the ceiling was reached, never passed
    streams = arrivals_by_stream(receiver.on("/two"))
    assert set(streams) == {f"k{i}" for i in range(6)}
    assert all(in_order(numbers) and len(numbers) == 4 for numbers in streams.values())
    assert all(r.headers[KEY].startswith("k") for r in receiver.on("/two"))
    assert sum(sample(body, "herald_streams_continued_total") for body in bodies) >= 1
