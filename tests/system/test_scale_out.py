"""Scale-out in production shape: two `herald api` processes and three `herald worker`
processes against one PostgreSQL and one Redis, the reconcile cron as a process of its own, and
5,000 deliveries to ten destinations. Mid-run one worker is killed (SIGKILL) while it has
requests out, and one API is killed and started again on its port while producers post.

Every accepted delivery succeeds; the only extra sends are of deliveries the killed worker held,
each with the same id, and no more than it could have had in flight; the destinations' ceilings
hold across the workers. Counted at a real receiver and in the database, never timed: how fast
this shape goes, beside one API and one worker, is `make bench` (the `scale_out` figure)."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import psutil
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.processes import (
    ApiProcess,
    HeraldProcess,
    herald_env,
    restart_api,
    start,
    start_api,
    wait_healthy,
)
from tests.fixtures.receiver import Received, Receiver, Reply
from tests.fixtures.stack import ADMIN, Stack
from tests.fixtures.waiting import all_succeeded, eventually

DELIVERIES = 5_000
PRODUCERS = 16
CONCURRENCY = 20  # each worker's
OPEN = [f"/open-{n}" for n in range(8)]
NARROW, NARROW_CEILING = "/narrow", 4  # max_in_flight
METERED, METERED_RATE = "/metered", 50  # rate_limit_per_second
PATHS = [*OPEN, NARROW, METERED]
# The open destinations answer slowly, so the workers fill up and the backlog grows while the
# producers post: the kill then finds the killed worker with requests out.
OPEN_REPLY = Reply(200, delay=0.1)
# One environment for every process, as one env file would give them. Timeouts are generous
# so that a survivor's answer slowed down by a starved machine is never (correctly) sent again:
# that would be an extra send this test is not about. The reconcile cron runs every second.
SETTINGS = {
    "HERALD_WORKER_CONCURRENCY": str(CONCURRENCY),
    "HERALD_REQUEST_TIMEOUT_SECONDS": "5",
    "HERALD_LEASE_SECONDS": "12",
    "HERALD_RELAY_INTERVAL_SECONDS": "0.2",
    "HERALD_RECONCILE_GRACE_SECONDS": "0.5",
    "HERALD_ENQUEUED_STALE_SECONDS": "5",
}


@contextmanager
def fleet(stack: Stack, logs: Path) -> Iterator[tuple[list[ApiProcess], list[HeraldProcess]]]:
    """Two APIs, three workers and the reconcile cron (against the first API), all stopped at
    the end whatever happened to them."""
    with ExitStack() as stopping:
        apis = [start_api(stack, logs, **SETTINGS) for _ in range(2)]
        workers = [
            start(
                "worker",
                herald_env(
                    stack, **SETTINGS, HERALD_WORKER_HEARTBEAT_FILE=str(logs / f"w{n}.beat")
                ),
                logs / f"worker-{n}.log",
            )
            for n in range(3)
        ]
        cron_env = herald_env(stack, **SETTINGS, HERALD_API_URL=apis[0].base_url)
        cron = start("reconcile", cron_env, logs / "cron.log", "--every", "1s")
        for process in [*apis, *workers, cron]:
            stopping.callback(process.stop)
        for worker in workers:
            worker.wait_for_log("worker.started", timeout=60)
        yield apis, workers


async def produce(
    apis: list[ApiProcess], tenant: dict[str, str], endpoints: dict[str, str], counts: Counter[str]
) -> dict[str, str]:
    """Post the deliveries, one a request, ``PRODUCERS`` at a time, alternating between the
    APIs. A request that fails (its API is down) goes to the other API with the same
    Idempotency-Key. Returns {idempotency key: delivery id}."""
    accepted: dict[str, str] = {}
    numbers = iter(range(DELIVERIES))

    async def producer(http: httpx.AsyncClient) -> None:
        for n in numbers:
            key = f"scale-{n}"
            body = {
                "endpoint_id": endpoints[PATHS[n % len(PATHS)]],
                "event_type": "scale.test",
                "payload": {"n": n},
            }
            for attempt in range(200):
                api = apis[(n + attempt) % len(apis)]
                try:
                    response = await http.post(
                        f"{api.base_url}/v1/deliveries",
                        json=body,
                        headers={**tenant, "Idempotency-Key": key},
                    )
                except httpx.TransportError:
                    counts["transport_errors"] += 1
                    await asyncio.sleep(0.05)
                    continue
                assert response.status_code in (200, 202), response.text
                counts[str(response.status_code)] += 1
                accepted[key] = response.json()["id"]
                break
            else:
                raise AssertionError(f"{key}: no API took it")

    async with httpx.AsyncClient(timeout=30) as http:
        await asyncio.gather(*(producer(http) for _ in range(PRODUCERS)))
    return accepted


async def restart_midway(api: ApiProcess, stack: Stack, counts: Counter[str]) -> None:
    """SIGKILL ``api`` once half the deliveries are accepted, and start it again on its port."""

    async def accepted_so_far() -> int:
        return counts["200"] + counts["202"]

    await eventually(accepted_so_far, lambda n: n >= DELIVERIES // 2, timeout=300)
    api.stop(signal.SIGKILL)
    api.process = restart_api(api, stack, **SETTINGS).process  # the fleet stops the new one
    await wait_healthy(api)


async def test_two_apis_and_three_workers_lose_nothing_when_a_worker_and_an_api_die(
    receiver: Receiver, stack: Stack, engine: AsyncEngine, tmp_path: Path
) -> None:
    for path in OPEN:
        receiver.script(path, *[OPEN_REPLY] * DELIVERIES)
    with fleet(stack, tmp_path) as (apis, workers):
        await wait_healthy(apis[0])
        await wait_healthy(apis[1])
        async with httpx.AsyncClient(base_url=apis[0].base_url, timeout=30) as http:
            created = await http.post("/v1/tenants", json={"name": "scale"}, headers=ADMIN)
            tenant = {"Authorization": f"Bearer {created.json()['api_key']}"}
            limits = {
                NARROW: {"max_in_flight": NARROW_CEILING},
                METERED: {"rate_limit_per_second": METERED_RATE},
            }
            endpoints = {}
            for path in PATHS:
                body = {"url": receiver.url(path), **limits.get(path, {})}
                response = await http.post("/v1/endpoints", json=body, headers=tenant)
                assert response.status_code == 201, response.text
                endpoints[path] = response.json()["id"]

        # The first worker is killed the moment a request of its own reaches the receiver
        # (once a fifth of the work is done): that request is certainly unanswered, so it is
        # certainly sent again, by another worker, once the lease runs out.
        doomed = psutil.Process(workers[0].process.pid)
        killed: list[int] = []

        def kill_when_it_sends(request: Received) -> None:
            if killed or len(receiver.requests) < DELIVERIES // 5:
                return
            if request.peer_port in {c.laddr.port for c in doomed.net_connections("tcp")}:
                doomed.kill()
                killed.append(len(receiver.requests))

        receiver.on_arrival = kill_when_it_sends
        counts: Counter[str] = Counter()
        accepted, _ = await asyncio.gather(
            produce(apis, tenant, endpoints, counts),
            restart_midway(apis[1], stack, counts),
        )
        ids = set(accepted.values())

        await all_succeeded(engine, DELIVERIES, timeout=600)
        assert workers[0].process.wait(10) == -signal.SIGKILL

    # Every accepted intent is one delivery: retries after the API died took the same key.
    assert len(accepted) == DELIVERIES and len(ids) == DELIVERIES
    assert counts["transport_errors"] >= 1  # the API really went away under the producers
    async with engine.connect() as connection:
        assert await connection.scalar(text("SELECT count(*) FROM deliveries")) == DELIVERIES
        # Held by the killed worker and taken over once its lease ran out: claimed once more
        # than recorded (the lost claim wrote no attempt). Nothing else was claimed twice.
        rows = await connection.execute(
            text(
                "SELECT d.id, d.attempt_count, count(a.*) AS recorded FROM deliveries AS d"
                " LEFT JOIN attempts AS a ON a.delivery_id = d.id GROUP BY d.id"
            )
        )
        claims = {row.id: (row.attempt_count, row.recorded) for row in rows}
    assert set(claims) == ids
    taken_over = {id_ for id_, (claimed, recorded) in claims.items() if claimed == recorded + 1}
    assert all(recorded == 1 for _, recorded in claims.values())
    assert all(claimed - recorded <= 1 for claimed, recorded in claims.values())
    assert 1 <= len(taken_over) <= CONCURRENCY

    # At the receiver: each delivery arrived, under its own id as the Idempotency-Key; the
    # extra arrivals are sends the killed worker made and never recorded, each sent again.
    arrivals = receiver.requests
    seen = Counter(r.headers["webhook-id"] for r in arrivals)
    assert all(r.headers["Idempotency-Key"] == r.headers["webhook-id"] for r in arrivals)
    assert set(seen) == ids
    extra = {id_ for id_, times in seen.items() if times > 1}
    assert 1 <= len(extra) <= CONCURRENCY  # the killed worker had at most that many out
    assert extra <= taken_over and max(seen.values()) == 2

    # Per-destination ceilings held across the workers, the killed one included.
    assert receiver.max_in_flight_on[NARROW] <= NARROW_CEILING
    assert receiver.most_starts_in_any_second(METERED) <= METERED_RATE + 1
    assert len(receiver.on(METERED)) >= DELIVERIES // len(PATHS)
