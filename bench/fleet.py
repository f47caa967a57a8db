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


async def scale_out(client: Client, deliveries: int, rounds: int) -> dict[str, Any]:
    """Each shape ``rounds`` times, the shapes in turn within a round (drift on the machine
    hits them alike); the median run of each."""
    stack = client.stack
    shapes: dict[str, tuple[int, int, dict[str, str]]] = {"1+1": (1, 1, {}), "2+3": (2, 3, {})}
    runs: dict[str, list[dict[str, Any]]] = {}
    cluster: TcpRedisCluster | None = None
    standby: TcpPostgres | None = None
    try:
        if isinstance(stack.postgres, TcpPostgres):  # both are made of the system servers
            cluster = TcpRedisCluster(stack.workdir / "fleet-cluster")
            await asyncio.to_thread(cluster.start)
            standby = await asyncio.to_thread(
                stack.postgres.standby, stack.workdir / "fleet-standby", REPLICA_PORT
            )
            stack.cluster = cluster
            on_cluster = {
                "HERALD_REDIS_URL": cluster.herald_url,
                "HERALD_QUEUE_REDIS_URL": stack.redis_url,
            }
            on_replica = {"HERALD_DATABASE_REPLICA_URLS": standby.url}
            # Each alone, then both: on two cores every server process takes its share of the
            # CPU, so each one's cost shows apart.
            shapes["2+3 cluster"] = (2, 3, on_cluster)
            shapes["2+3 replica"] = (2, 3, on_replica)
            shapes["2+3 cluster+replica"] = (2, 3, {**on_cluster, **on_replica})
        for round_ in range(rounds):
            for name, (apis, workers, overrides) in shapes.items():
                progress(f"scale out: {name}, {deliveries} deliveries (round {round_ + 1})")
                run = await _one_shape(client, apis, workers, deliveries, overrides)
                runs.setdefault(name, []).append(run)
    finally:
        stack.stop_workers()
        stack.stop("api")
        stack.stop("reconcile")
        stack.overrides, stack.cluster = {}, None
        # The servers first: nothing after them may leave them running.
        if cluster is not None:
            await asyncio.to_thread(cluster.close)
        if standby is not None:
            await asyncio.to_thread(standby.stop)
        await stack.start_api()
    medians = {name: _median_run(shape_runs) for name, shape_runs in runs.items()}
    return _figure(deliveries, medians)


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of the median rate, whole: its CPU and reads belong with that rate."""
    ordered = sorted(runs, key=lambda run: float(run["per_second"]))
    return {**ordered[len(ordered) // 2], "rates": [run["per_second"] for run in runs]}


def _figure(deliveries: int, runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    fleet = runs["2+3"]
    return {
        "deliveries": deliveries,
        **fleet,
        "baseline": runs["1+1"],
        "ratio": fleet["per_second"] / runs["1+1"]["per_second"],
        "on_cluster": runs.get("2+3 cluster"),
        "on_replica": runs.get("2+3 replica"),
        "on_cluster_and_replica": runs.get("2+3 cluster+replica"),
    }
