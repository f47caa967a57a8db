"""Each of `make bench`'s figures: what it measures and beside which baseline, at the volumes of
a full run or a quick one, written into the results under its name."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from statistics import median
from typing import Any

from bench import (
    backlog,
    baselines,
    credentials,
    fleet,
    history,
    isolation,
    ordered,
    parking,
    payload_classes,
    polling,
    probes,
    programs,
    redis_cluster,
    replica_reads,
    write_costs,
)
from bench.console import console_pages
from bench.load import Client
from bench.stack import BARE, progress

# The short figures run this many times and report the median; the long ones run once.
ROUNDS = 3
FIGURES = (
    "accept",
    "batch",
    "e2e",
    "payload_classes",
    "latency",
    "parked",
    "in_flight_1",
    "reconcile",
    "worker_rss",
    "scale_out",
    "console",
    "programs",
    "ordered",
    "polling",
    "credentials",
    "isolation",
    "write_costs",
    "replica",
    "redis_cluster",
    "history",
)
# As many in flight as the raw aiohttp loop keeps, whatever the number of workers.
IN_FLIGHT = 200


@dataclass(frozen=True)
class Volumes:
    accept_seconds: float
    batches: int
    e2e_instant: int
    e2e_50ms: int
    latency_seconds: float
    parked: int
    parked_seconds: float
    in_flight_1: int
    reconcile_rows: int
    spread_destinations: int
    rss_backlogs: tuple[int, int]
    scale_out: int
    console_history: int
    ordered_keys: tuple[int, int]  # keys x deliveries each
    one_key: int
    halted_streams: tuple[int, int]  # streams x deliveries each (the dead head among them)
    isolation_seconds: float  # the quiet tenant's measure, alone and beside each attack
    write_costs: tuple[int, int]  # batches of 1000, keyed single accepts
    history: int  # finished deliveries behind the path measured


FULL = Volumes(
    6, 40, 50_000, 20_000, 10, 30, 30, 40, 100_000, 1_000, (10_000, 1_000_000), 20_000, 1_000_000,
    (10_000, 10), 2_000, (1_000, 10), 8, (20, 5_000), 10_000_000,
)  # fmt: skip
QUICK = Volumes(
    4, 20, 10_000, 5_000, 5, 30, 10, 10, 20_000, 1_000, (5_000, 50_000), 5_000, 100_000,
    (1_000, 10), 500, (200, 10), 4, (5, 1_000), 1_000_000,
)  # fmt: skip


async def accept(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    """Single accepts against pgbench of the same statements, and -- at 32 clients -- the API's
    CPU per accept against a bare ASGI app running Herald's accept statement (bare_accept.py)."""
    await client.stack.start_bare_accept(client.tenant_id)
    try:
        for keyed in (False, True):
            for clients in (32, 64):
                # Rounds alternate Herald and its baselines, so drift hits them alike.
                herald_runs, pgbench_runs, bare_runs = [], [], []
                name = f"accept_{clients}" + ("_keyed" if keyed else "")
                for round_ in range(ROUNDS):
                    progress(f"{name}, then pgbench (round {round_ + 1})")
                    herald_runs.append(await client.accept(clients, v.accept_seconds, keyed=keyed))
                    pgbench_runs.append(
                        await baselines.pgbench(client, clients, v.accept_seconds, keyed=keyed)
                    )
                    if clients == 32:
                        bare_runs.append(
                            await client.accept(
                                clients,
                                v.accept_seconds,
                                keyed=False,
                                base=BARE,
                                serving=client.stack.bare_processes(),
                            )
                        )
                herald = {k: median([r[k] for r in herald_runs]) for k in herald_runs[0]}
                baseline = median(pgbench_runs)
                results[name] = {
                    **herald,
                    "pgbench_tps": baseline,
                    "ratio": herald["per_second"] / baseline,
                    "runs": herald_runs,
                    "pgbench_runs": pgbench_runs,
                }
                if bare_runs:
                    bare = {k: median([r[k] for r in bare_runs]) for k in bare_runs[0]}
                    results[name]["bare_asgi"] = {**bare, "runs": bare_runs}
    finally:
        client.stack.stop("bare")


async def batch(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    progress("batch accept")
    runs, baseline = [], []
    for _ in range(ROUNDS):  # alternating, as for single accepts
        runs.append(await client.batch(clients=4, batches=v.batches))
        baseline.append(await baselines.batch_sql(client, clients=4, batches=v.batches))
    results["batch"] = {
        "per_second": median(runs),
        "runs": runs,
        "sql_per_second": median(baseline),
        "sql_runs": baseline,
    }


async def end_to_end(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    """Both end-to-end figures, and the share of HOT updates of `deliveries` they made."""
    stack = client.stack
    stack.stop_workers()
    await asyncio.sleep(2)  # every backend has published its statistics
    updates, hot = await probes.delivery_updates(stack)
    for name, receiver, total in (
        ("e2e_instant", "instant", v.e2e_instant),
        ("e2e_50ms", "slow", v.e2e_50ms),
    ):
        progress(f"{name}: {total} deliveries, then the raw aiohttp loop")
        herald = await client.end_to_end(receiver, total)
        raw = await baselines.raw_loop(receiver, total, IN_FLIGHT)
        results[name] = {
            **herald,
            "raw_per_second": raw,
            "deliveries": total,
            "ratio": herald["per_second"] / raw,
        }
    stack.stop_workers()
    await asyncio.sleep(2)
    updates_after, hot_after = await probes.delivery_updates(stack)
    updates, hot = updates_after - updates, hot_after - hot
    results["hot_updates"] = {"updates": updates, "hot": hot, "ratio": hot / max(updates, 1)}


async def payloads_kept_a_day(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    """e2e once the tenant keeps its payloads a day: the days ahead split by payload class."""
    client.stack.stop_workers()
    results["e2e_payload_classes"] = await payload_classes.measure(client, v.e2e_instant, IN_FLIGHT)
    client.stack.stop_workers()


async def latency(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    progress("latency at 200 intents/s, then the receiver's own at 200 requests/s")
    client.stack.stop_workers()
    await client.stack.clean_slate()
    client.stack.start_workers()
    await client.stack.wait_workers_idle()
    runs, raw_runs = [], []
    for _ in range(ROUNDS):  # alternating, so drift on the machine hits both alike
        runs.append(await client.latency(200, v.latency_seconds))
        raw_runs.append(await baselines.raw_latency(client, 200, v.latency_seconds))
    results["latency_200_per_s"] = {
        "p50_ms": median([r["p50_ms"] for r in runs]),
        "p99_ms": median([r["p99_ms"] for r in runs]),
        "raw_p50_ms": median([r["p50_ms"] for r in raw_runs]),
        "raw_p99_ms": median([r["p99_ms"] for r in raw_runs]),
        "stages": runs[len(runs) // 2]["stages"],  # of one round: where its time went
        "runs": runs,
        "raw_runs": raw_runs,
    }
    client.stack.stop_workers()


async def parked(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    progress(f"{v.parked} deliveries parked behind a 429, reconcile every 2 s")
    results["parked"] = await parking.parked(client, v.parked, v.parked_seconds)


async def in_flight_1(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    progress(f"{v.in_flight_1} deliveries behind max_in_flight 1 and a 2 s receiver")
    results["in_flight_1"] = await parking.in_flight_one(client, v.in_flight_1)


async def reconcile(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    progress(f"reconcile of {v.reconcile_rows} rows")
    results["reconcile"] = await backlog.reconcile(client, v.reconcile_rows, 1)
    progress(f"reconcile of {v.reconcile_rows} rows over {v.spread_destinations} destinations")
    results["reconcile_spread"] = await backlog.reconcile(
        client, v.reconcile_rows, v.spread_destinations
    )


async def worker_rss(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    progress(f"worker RSS with backlogs of {v.rss_backlogs[0]} and {v.rss_backlogs[1]}")
    results["worker_rss_mb"] = {str(n): await backlog.worker_rss(client, n) for n in v.rss_backlogs}


async def scale_out(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    results["scale_out"] = await fleet.scale_out(client, v.scale_out, ROUNDS)


async def console(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    progress(f"console pages over {v.console_history} deliveries")
    results["console"] = await console_pages(client, v.console_history)


async def tenant_programs(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    progress("tenant programs at their budget")
    results["programs"] = programs.measure()  # in this process: no server is involved


async def ordered_delivery(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    keys, per_key = v.ordered_keys
    progress(f"ordered: {keys} keys x {per_key}, then the same unordered")
    results["ordered_keys"] = await ordered.many_keys(client, keys, per_key)
    progress(f"ordered: one key, {v.one_key} deliveries, then raw requests and records")
    results["ordered_one_key"] = await ordered.one_key(client, v.one_key)
    streams, per_stream = v.halted_streams
    progress(f"ordered: {streams} halted streams, reconcile every 2 s")
    results["ordered_halted"] = await ordered.halted(client, streams, per_stream, v.parked_seconds)


async def polled(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    results["polling"] = await polling.measure(client, v.e2e_instant)


async def endpoint_credentials(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    progress("an attempt's credentials: sealed secrets, v1a, a cached OAuth2 token")
    results["credentials"] = await asyncio.to_thread(credentials.measure_all)


async def tenant_isolation(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    results["isolation"] = await isolation.measure(client, v.isolation_seconds)


async def primary_write_costs(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    results["write_costs"] = await write_costs.measure(client, *v.write_costs)


async def long_history(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    results["history"] = await history.measure(client, v.history, v.accept_seconds, v.e2e_50ms)


async def replica(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    await replica_reads.replica_reads(client, 3 * v.accept_seconds, results)


async def on_redis_cluster(client: Client, v: Volumes, results: dict[str, Any]) -> None:
    results["redis_cluster"] = await redis_cluster.measure(
        client, v.accept_seconds, v.e2e_instant // 2, ROUNDS
    )


RUNS = {
    "accept": accept,
    "batch": batch,
    "e2e": end_to_end,
    "latency": latency,
    "parked": parked,
    "in_flight_1": in_flight_1,
    "reconcile": reconcile,
    "worker_rss": worker_rss,
    "scale_out": scale_out,
    "console": console,
    "programs": tenant_programs,
    "ordered": ordered_delivery,
    "polling": polled,
    "credentials": endpoint_credentials,
    "isolation": tenant_isolation,
    "write_costs": primary_write_costs,
    "history": long_history,
    "payload_classes": payloads_kept_a_day,
    "replica": replica,
    "redis_cluster": on_redis_cluster,
}
