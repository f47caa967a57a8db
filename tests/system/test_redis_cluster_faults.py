"""Herald on a Redis Cluster of three masters (``redis-server --cluster-enabled yes``, joined by
``redis-cli --cluster create``), arq on a single Redis beside it, while faults hit the cluster
with deliveries flowing: the master holding the region's wake-ups killed and restarted empty,
FLUSHALL on every master, and a master's slots moved by ``redis-cli --cluster reshard``.

In each, every accepted delivery succeeds; a delivery arrives twice only when it was claimed
twice (a lease ran out); status answers stay correct; and the ceilings hold where their state
survived (a restarted or flushed master starts its destinations' counts over, as one Redis
does: docs/operations.md, "Redis Cluster"). Counted at a real receiver and in PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import signal
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.flow.service.gate_scripts import flow_keys
from devstack.redis_cluster import TcpRedisCluster
from tests.fixtures.processes import ApiProcess, herald_env, start, start_api, wait_healthy
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.stack import ADMIN, Stack
from tests.fixtures.waiting import all_succeeded, eventually

DELIVERIES = 900
PRODUCERS = 8
OPEN = [f"/open-{n}" for n in range(8)]
NARROW, NARROW_CEILING = "/narrow", 3  # max_in_flight
METERED, METERED_RATE = "/metered", 10  # rate_limit_per_second: its share takes ~9 s
PATHS = [*OPEN, NARROW, METERED]
REGION = "local"
Placement = Callable[[int], bool]
SETTINGS = {
    "HERALD_WORKER_CONCURRENCY": "20",
    "HERALD_REQUEST_TIMEOUT_SECONDS": "5",
    "HERALD_LEASE_SECONDS": "12",
    "HERALD_RELAY_INTERVAL_SECONDS": "0.2",
    "HERALD_RECONCILE_GRACE_SECONDS": "0.5",
    "HERALD_ENQUEUED_STALE_SECONDS": "3",
}


def wake_key(region: str) -> str:
    return f"herald:wake:{{{region}}}:tenants"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[TcpRedisCluster]:
    servers = TcpRedisCluster(tmp_path / "cluster")
    try:
        await asyncio.to_thread(servers.start)
        yield servers
    finally:
        await asyncio.to_thread(servers.close)


@contextmanager
def fleet(stack: Stack, cluster: TcpRedisCluster, logs: Path, region: str) -> Iterator[ApiProcess]:
    """One API, two workers and the reconcile cron of ``region``, the flow on the cluster,
    arq's queue on the suite's single Redis."""
    env = {**SETTINGS, "HERALD_REDIS_URL": cluster.herald_url, "HERALD_REGION": region}
    env["HERALD_QUEUE_REDIS_URL"] = stack.redis_url
    with ExitStack() as stopping:
        api = start_api(stack, logs, **env)
        stopping.callback(api.stop)
        workers = []
        for n in range(2):
            beat = {"HERALD_WORKER_HEARTBEAT_FILE": str(logs / f"w{n}.beat")}
            worker = start("worker", herald_env(stack, **env, **beat), logs / f"worker-{n}.log")
            stopping.callback(worker.stop)
            workers.append(worker)
        cron_env = herald_env(stack, **env, HERALD_API_URL=api.base_url)
        stopping.callback(start("reconcile", cron_env, logs / "cron.log", "--every", "1s").stop)
        for worker in workers:
            worker.wait_for_log("worker.started", timeout=60)
        yield api


async def destinations(
    http: httpx.AsyncClient, receiver: Receiver, cluster: TcpRedisCluster, placed: Placement
) -> tuple[dict[str, str], dict[str, str]]:
    """A tenant and its endpoints, the ceilinged ones' flow keys on a master ``placed`` takes
    (by its port)."""
    created = await http.post("/v1/tenants", json={"name": "cluster"}, headers=ADMIN)
    tenant = {"Authorization": f"Bearer {created.json()['api_key']}"}
    limits = {NARROW: {"max_in_flight": NARROW_CEILING}, METERED: {"rate_limit_per_second": 10}}
    endpoints: dict[str, str] = {}
    for path in PATHS:
        while path not in endpoints:
            body = {"url": receiver.url(path), **limits.get(path, {})}
            response = await http.post("/v1/endpoints", json=body, headers=tenant)
            assert response.status_code == 201, response.text
            endpoint_id = response.json()["id"]
            owner = await asyncio.to_thread(cluster.owner, flow_keys(endpoint_id).slots)
            if path in limits and not placed(owner):
                continue  # another one; this one stays, unused
            endpoints[path] = endpoint_id
    return tenant, endpoints


async def produce(
    http: httpx.AsyncClient, tenant: dict[str, str], ends: dict[str, str], accepted: list[str]
) -> None:
    """The deliveries, ``PRODUCERS`` posting at once, their ids appended to ``accepted``:
    accepting never needs Redis, so every one is taken whatever the cluster goes through."""
    numbers = iter(range(DELIVERIES))

    async def producer() -> None:
        for n in numbers:
            body = {"endpoint_id": ends[PATHS[n % len(PATHS)]], "event_type": "c", "payload": {}}
            response = await http.post("/v1/deliveries", json=body, headers=tenant)
            assert response.status_code == 202, response.text
            accepted.append(response.json()["id"])

    await asyncio.gather(*(producer() for _ in range(PRODUCERS)))


async def run_with_fault(
    stack: Stack,
    cluster: TcpRedisCluster,
    receiver: Receiver,
    engine: AsyncEngine,
    logs: Path,
    fault: Callable[[], Awaitable[None]],
    placed: Placement = lambda _: True,
    region: str = REGION,
) -> tuple[set[str], Counter[int]]:
    """Deliveries posted and sent; ``fault`` once a fifth have arrived. Returns the accepted
    ids and the status codes the status route answered while the fault was under way."""
    for path in OPEN:
        receiver.script(path, *[Reply(200, delay=0.05)] * DELIVERIES)
    statuses: Counter[int] = Counter()
    with fleet(stack, cluster, logs, region) as api:
        await wait_healthy(api)
        async with httpx.AsyncClient(base_url=api.base_url, timeout=30) as http:
            tenant, ends = await destinations(http, receiver, cluster, placed)

            async def fault_midway() -> None:
                await eventually(lambda: _arrived(receiver), lambda n: n >= DELIVERIES // 5)
                polling = asyncio.create_task(
                    _poll_status(http, tenant, accepted, receiver, statuses)
                )
                try:
                    await fault()
                finally:
                    polling.cancel()

            accepted: list[str] = []
            await asyncio.gather(produce(http, tenant, ends, accepted), fault_midway())

            await all_succeeded(engine, DELIVERIES, timeout=300)
            for delivery_id in sorted(accepted)[:: DELIVERIES // 30]:
                answer = await http.get(f"/v1/deliveries/{delivery_id}", headers=tenant)
                assert answer.status_code == 200 and answer.json()["state"] == "succeeded"
    return set(accepted), statuses


async def _arrived(receiver: Receiver) -> int:
    return len(receiver.requests)


async def _poll_status(
    http: httpx.AsyncClient,
    tenant: dict[str, str],
    accepted: list[str],
    receiver: Receiver,
    seen: Counter[int],
) -> None:
    """Ask after the newest deliveries (pending: their explanation asks Redis for the flow and
    the wake-up) and some that arrived, as producers would, for as long as the fault lasts."""
    while True:
        asked = [*accepted[-5:], *(r.headers["webhook-id"] for r in receiver.requests[-3:])]
        for delivery_id in asked:
            answer = await http.get(f"/v1/deliveries/{delivery_id}", headers=tenant)
            seen[answer.status_code] += 1
        await asyncio.sleep(0.1)


def worker_events(logs: Path, name: str) -> list[dict[str, Any]]:
    """The workers' structured log lines of event ``name``."""
    entries = (
        json.loads(line)
        for log in logs.glob("worker-*.log")
        for line in log.read_text().splitlines()
        if line.startswith("{")
    )
    return [entry for entry in entries if entry["event"] == name]


async def assert_nothing_lost(engine: AsyncEngine, receiver: Receiver, ids: set[str]) -> None:
    """Each accepted delivery is one row, succeeded with one recorded attempt, and arrived; an
    arrival beyond the first only for a delivery claimed more often than recorded."""
    assert len(ids) == DELIVERIES
    async with engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT d.id, d.attempt_count, count(a.*) AS recorded FROM deliveries AS d"
                " LEFT JOIN attempts AS a ON a.delivery_id = d.id GROUP BY d.id"
            )
        )
        claims = {row.id: (row.attempt_count, row.recorded) for row in rows}
    assert set(claims) == ids
    assert all(recorded == 1 for _, recorded in claims.values())
    seen = Counter(r.headers["webhook-id"] for r in receiver.requests)
    assert set(seen) == ids
    for delivery_id, times in seen.items():
        claimed, _ = claims[delivery_id]
        assert times <= claimed, f"{delivery_id} arrived {times} times, claimed {claimed}"


async def test_the_wake_ups_master_killed_and_restarted_empty_loses_nothing(
    stack: Stack, cluster: TcpRedisCluster, receiver: Receiver, engine: AsyncEngine, tmp_path: Path
) -> None:
    # The master of the region's wake-ups (and of slot 0, the client's first): every taker
    # stalls until it is back, and what it held is gone.
    victim = cluster.owner(wake_key(REGION))

    async def kill_and_restart() -> None:
        before = len(receiver.requests)
        await asyncio.to_thread(cluster.processes[victim].send_signal, signal.SIGKILL)
        await asyncio.to_thread(cluster.processes[victim].wait, 10)
        await asyncio.sleep(3)  # every taker now fails to reach the region's wake-ups
        stalled = len(receiver.requests)
        await asyncio.to_thread(cluster.start_node, victim)  # its slots back, its keys gone
        await asyncio.to_thread(cluster.wait_ok)
        assert stalled - before < DELIVERIES - before  # the outage came before the end

    ids, statuses = await run_with_fault(
        stack, cluster, receiver, engine, tmp_path, kill_and_restart, lambda port: port != victim
    )
    assert worker_events(tmp_path, "pump.backoff")  # the takers really lost their wake-ups
    await assert_nothing_lost(engine, receiver, ids)
    assert statuses and set(statuses) == {200}  # status answered throughout, never a 5xx
    assert receiver.max_in_flight_on[NARROW] <= NARROW_CEILING
    assert receiver.most_starts_in_any_second(METERED) <= METERED_RATE + 1


async def test_another_master_lost_leaves_the_other_masters_destinations_flowing(
    stack: Stack, cluster: TcpRedisCluster, receiver: Receiver, engine: AsyncEngine, tmp_path: Path
) -> None:
    # The master of slot 0, which redis-py asks first when it starts over; the region's
    # wake-ups on another one.
    victim = cluster.slot_owners()[0]
    region = next(f"r{n}" for n in range(100) if cluster.owner(wake_key(f"r{n}")) != victim)
    sent_while_down: list[int] = []

    async def kill_and_restart() -> None:
        await asyncio.to_thread(cluster.processes[victim].send_signal, signal.SIGKILL)
        await asyncio.to_thread(cluster.processes[victim].wait, 10)
        await asyncio.sleep(1)  # what was claimed before the kill has gone out
        before = len(receiver.requests)
        await asyncio.sleep(3)
        sent_while_down.append(len(receiver.requests) - before)
        await asyncio.to_thread(cluster.start_node, victim)
        await asyncio.to_thread(cluster.wait_ok)

    ids, statuses = await run_with_fault(
        stack,
        cluster,
        receiver,
        engine,
        tmp_path,
        kill_and_restart,
        lambda port: port != victim,
        region=region,
    )
    # Destinations whose flow keys live on the other masters were served all along.
    assert sent_while_down[0] > 0
    await assert_nothing_lost(engine, receiver, ids)
    assert statuses and set(statuses) == {200}
    assert receiver.max_in_flight_on[NARROW] <= NARROW_CEILING
    assert receiver.most_starts_in_any_second(METERED) <= METERED_RATE + 1


async def test_flushall_on_every_master_mid_run_loses_nothing(
    stack: Stack, cluster: TcpRedisCluster, receiver: Receiver, engine: AsyncEngine, tmp_path: Path
) -> None:
    async def flush() -> None:
        assert await asyncio.to_thread(cluster.key_count) > 0  # wake-ups, flow keys: in use
        await asyncio.to_thread(cluster.flushall)
        await asyncio.sleep(1)

    ids, statuses = await run_with_fault(stack, cluster, receiver, engine, tmp_path, flush)
    runs = worker_events(tmp_path, "reconcile.finished")
    assert sum(run["destinations_armed"] for run in runs) > 0  # reconcile put the wake-ups back
    await assert_nothing_lost(engine, receiver, ids)
    assert statuses and set(statuses) == {200}
    # The flush took the counts of requests already out: a destination's ceiling starts over,
    # so for as long as those last it may see them and a new ceiling's worth, never more.
    assert receiver.max_in_flight_on[NARROW] <= 2 * NARROW_CEILING
    assert receiver.most_starts_in_any_second(METERED) <= 2 * (METERED_RATE + 1)


async def test_a_reshard_while_deliveries_flow_loses_nothing_and_keeps_ceilings(
    stack: Stack, cluster: TcpRedisCluster, receiver: Receiver, engine: AsyncEngine, tmp_path: Path
) -> None:
    during: list[int] = []
    source = cluster.owner(wake_key(REGION))
    target = next(port for port in cluster.ports if port != source)

    async def move_the_wake_ups_master() -> None:
        before = len(receiver.requests)
        # Every slot the source serves, its keys with them, the wake-ups' slot among them.
        await asyncio.to_thread(cluster.reshard, source, target, cluster.slot_count(source))
        during.append(len(receiver.requests) - before)
        assert cluster.owner(wake_key(REGION)) == target

    ids, statuses = await run_with_fault(
        stack, cluster, receiver, engine, tmp_path, move_the_wake_ups_master, source.__eq__
    )
    assert during[0] > 0  # deliveries arrived while the slots moved
    await assert_nothing_lost(engine, receiver, ids)
    assert statuses and set(statuses) == {200}
    # The keys moved with their slots: every count survived, every ceiling held.
    assert receiver.max_in_flight_on[NARROW] <= NARROW_CEILING
    assert receiver.most_starts_in_any_second(METERED) <= METERED_RATE + 1
