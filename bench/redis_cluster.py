"""Herald on a Redis Cluster of three masters beside Herald on one Redis, in the same run.

The cluster is made as an operator makes one (``redis-server --cluster-enabled yes`` three
times, ``redis-cli --cluster create``); Herald's flow goes there (``redis+cluster://``) and arq's
queue to the bench's single Redis, as docs/operations.md tells a cluster's operator to run it.
Rounds alternate the two shapes, so drift on the machine hits both alike. Measured in each:
single accepts (workers stopped; the API arms wake-ups as it accepts) and the instant
receiver's end-to-end figure, over 64 destinations so that their keys spread; also the commands each master ran per delivery
(INFO's total_commands_processed), and where 1,000 destinations' keys fall.
"""

from __future__ import annotations

import asyncio
from statistics import median
from typing import Any

import redis
from redis.crc import key_slot

from app.core.ids import new_id
from app.flow.service.gate_scripts import flow_keys
from bench.load import RECEIVERS, Client
from bench.stack import progress
from devstack.redis_cluster import TcpRedisCluster
from devstack.tcp_servers import TcpRedis

ACCEPT_CLIENTS = 32
DESTINATIONS = 1_000
E2E_DESTINATIONS = 64  # round robin; a tenant has 100 endpoints at most by default


def _work(port: int) -> tuple[int, float]:
    """Commands the node has run, and the CPU seconds its process has used (Redis's own
    count: user and system), since it started."""
    with redis.Redis(port=port) as node:
        cpu = node.info("cpu")
        return (
            int(node.info("stats")["total_commands_processed"]),
            float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]),
        )


async def _restart(client: Client, overrides: dict[str, str]) -> None:
    stack = client.stack
    stack.stop_workers()
    stack.stop("api")
    stack.overrides = overrides
    await stack.start_api()


async def _one_round(
    client: Client,
    shape: str,
    cluster: TcpRedisCluster,
    spread_over: list[str],
    seconds: float,
    deliveries: int,
) -> dict[str, Any]:
    stack = client.stack
    progress(f"redis cluster: {shape}, accept then e2e of {deliveries}")
    stack.stop_workers()
    await stack.clean_slate()
    accepted = await client.accept(ACCEPT_CLIENTS, seconds, keyed=False)
    assert isinstance(stack.redis, TcpRedis)
    # Where the flow runs: the cluster's masters, or the one Redis (which holds arq's queue in
    # both shapes; its polling, a few commands a second, is counted in the single shape only).
    ports = cluster.ports if shape == "cluster" else [stack.redis.port]
    before = {port: _work(port) for port in ports}
    items = [
        {"endpoint_id": spread_over[n % len(spread_over)], "event_type": "bench", "payload": {}}
        for n in range(deliveries)
    ]
    e2e = await client.end_to_end("instant", deliveries, items)
    after = {port: _work(port) for port in ports}
    ran = {port: after[port][0] - before[port][0] for port in ports}
    cpu = {port: after[port][1] - before[port][1] for port in ports}
    busiest_us = 1e6 * max(cpu.values()) / deliveries
    return {
        "accept_per_second": accepted["per_second"],
        "e2e_per_second": e2e["per_second"],
        "commands_per_delivery": sum(ran.values()) / deliveries,
        "busiest_master_share": max(ran.values()) / max(sum(ran.values()), 1),
        # The busiest Redis process's CPU a delivery, and the rate at which it would use a
        # whole core: what one region's wake-ups' master caps a region at.
        "busiest_master_cpu_us": busiest_us,
        "busiest_master_full_at": 1e6 / busiest_us,
    }


def _spread(cluster: TcpRedisCluster) -> dict[str, Any]:
    """Where the flow keys of 1,000 destinations fall: by master (the load a master carries)
    and by slot (a slot is what moves in a reshard)."""
    owners = cluster.slot_owners()
    per_master = dict.fromkeys(cluster.ports, 0)
    per_slot: dict[int, int] = {}
    for _ in range(DESTINATIONS):
        keys = flow_keys(new_id("ep"))
        slot = key_slot(keys.slots.encode())
        per_slot[slot] = per_slot.get(slot, 0) + len(keys)
        per_master[owners[slot]] += len(keys)
    mean = sum(per_master.values()) / len(per_master)
    return {
        "keys_per_master": list(per_master.values()),
        "max_over_mean_master": max(per_master.values()) / mean,
        "slots_used": len(per_slot),
        "most_keys_in_a_slot": max(per_slot.values()),
        "mean_keys_per_used_slot": sum(per_slot.values()) / len(per_slot),
    }


async def measure(client: Client, seconds: float, deliveries: int, rounds: int) -> dict[str, Any]:
    stack = client.stack
    assert isinstance(stack.redis, TcpRedis), "the cluster figure runs against system servers"
    cluster = TcpRedisCluster(stack.workdir / "cluster")
    await asyncio.to_thread(cluster.start)
    shapes = {
        "single": {},
        "cluster": {
            "HERALD_REDIS_URL": cluster.herald_url,
            "HERALD_QUEUE_REDIS_URL": stack.redis_url,
        },
    }
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in shapes}
    instant = RECEIVERS["instant"]
    spread_over = [await client.create_endpoint(instant) for _ in range(E2E_DESTINATIONS)]
    try:
        stack.cluster = cluster
        for _ in range(rounds):
            for name, overrides in shapes.items():
                await _restart(client, overrides)
                run = await _one_round(client, name, cluster, spread_over, seconds, deliveries)
                runs[name].append(run)
        spread = await asyncio.to_thread(_spread, cluster)
    finally:
        stack.cluster = None
        await asyncio.to_thread(cluster.close)  # first: nothing after it may leave it running
        await _restart(client, {})
    figures = {
        name: {key: median(run[key] for run in shape_runs) for key in shape_runs[0]}
        for name, shape_runs in runs.items()
    }
    single, on_cluster = figures["single"], figures["cluster"]
    return {
        **on_cluster,
        "single": single,
        "accept_ratio": on_cluster["accept_per_second"] / single["accept_per_second"],
        "e2e_ratio": on_cluster["e2e_per_second"] / single["e2e_per_second"],
        "spread": spread,
        "runs": runs,
    }
