"""The scale-out figure: one API process and one worker, then the fleet shape (two API
processes, three workers and the reconcile cron) on one PostgreSQL and one Redis, then the same
fleet on a 3-master Redis Cluster and a streaming replica, as a platform team runs it.

Producers post one intent a request while the workers deliver. What sizing needs comes with
each: deliveries a second, CPU per intent in the APIs and per delivery in the workers; and for
the fleet on a replica, the reads readers made meanwhile and how many the replica answered.
Every worker keeps the same number in flight: more workers, more room.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench import probes
from bench.load import Client
from bench.stack import API, progress, python
from devstack.redis_cluster import TcpRedisCluster
from devstack.tcp_servers import TcpPostgres

# Every worker keeps this many in flight (the default); producers post with this many clients.
CONCURRENCY, CLIENTS = 100, 64
READERS = 8  # status and listing readers beside the producers, in every shape
REPLICA_PORT = 8963
LAG = "Herald-Read-Lag"


async def _read_while(client: Client, done: asyncio.Event, counts: dict[str, int]) -> None:
    """Ask the newest deliveries' listing and one's status, until ``done``."""
    newest = ""
    while not done.is_set():
        url = f"{API}/v1/deliveries/{newest}" if newest else f"{API}/v1/deliveries?limit=10"
        async with client.http.get(url, headers=client.tenant) as answer:
            body = await answer.json()
            counts["reads"] += 1
            counts["from_replica"] += LAG in answer.headers
            counts["errors"] += answer.status >= 500
        items = body.get("items") if isinstance(body, dict) else None
        newest = items[0]["id"] if items and not newest else ""


async def _one_shape(
    client: Client, apis: int, workers: int, deliveries: int, overrides: dict[str, str]
) -> dict[str, Any]:
    stack = client.stack
    stack.stop_workers()
    stack.stop("api")
    stack.stop("reconcile")
    stack.overrides = overrides
    await stack.clean_slate()
    await stack.start_api(apis)
    stack.start_workers(workers, concurrency=CONCURRENCY)
    if workers > 1:  # the fleet shape: the reconcile cron runs beside it
        stack.spawn("reconcile", python("-m", "app.cli", "reconcile", "--every", "5s"))
    await stack.wait_workers_idle()
    api_cpu = probes.CpuMeter(stack.api_processes())
    worker_cpu = probes.CpuMeter(stack.worker_processes())
    done, reads = asyncio.Event(), {"reads": 0, "from_replica": 0, "errors": 0}
    readers = [asyncio.create_task(_read_while(client, done, reads)) for _ in range(READERS)]
    started = time.perf_counter()
    try:
        per_second = await client.accept_while_delivering(deliveries, CLIENTS)
    finally:
        done.set()
        await asyncio.gather(*readers)
    return {
        "per_second": per_second,
        "api_cpu_ms": 1000 * api_cpu.seconds() / deliveries,
        "worker_cpu_ms": 1000 * worker_cpu.seconds() / deliveries,
        "reads_per_second": reads["reads"] / (time.perf_counter() - started),
        "replica_share": reads["from_replica"] / max(reads["reads"], 1),
        "read_errors": reads["errors"],
    }


async def scale_out(client: Client, deliveries: int) -> dict[str, Any]:
    stack = client.stack
    runs: dict[str, dict[str, Any]] = {}
    cluster: TcpRedisCluster | None = None
    standby: TcpPostgres | None = None
    try:
        for apis, workers in ((1, 1), (2, 3)):
            progress(f"scale out: {apis} API, {workers} worker(s), {deliveries} deliveries")
            runs[f"{apis}+{workers}"] = await _one_shape(client, apis, workers, deliveries, {})
        if isinstance(stack.postgres, TcpPostgres):  # both are made of the system servers
            progress("scale out: 2 API, 3 workers on a Redis Cluster and a streaming replica")
            cluster = TcpRedisCluster(stack.workdir / "fleet-cluster")
            await asyncio.to_thread(cluster.start)
            standby = await asyncio.to_thread(
                stack.postgres.standby, stack.workdir / "fleet-standby", REPLICA_PORT
            )
            stack.cluster = cluster
            overrides = {
                "HERALD_REDIS_URL": cluster.herald_url,
                "HERALD_QUEUE_REDIS_URL": stack.redis_url,
                "HERALD_DATABASE_REPLICA_URLS": standby.url,
            }
            runs["2+3 cluster+replica"] = await _one_shape(client, 2, 3, deliveries, overrides)
    finally:
        stack.stop_workers()
        stack.stop("api")
        stack.stop("reconcile")
        stack.overrides, stack.cluster = {}, None
        await stack.start_api()
        if cluster is not None:
            await asyncio.to_thread(cluster.close)
        if standby is not None:
            await asyncio.to_thread(standby.stop)
    fleet = runs["2+3"]
    return {
        "deliveries": deliveries,
        **fleet,
        "baseline": runs["1+1"],
        "ratio": fleet["per_second"] / runs["1+1"]["per_second"],
        "on_cluster_and_replica": runs.get("2+3 cluster+replica"),
    }
