"""What a figure counts rather than times: Redis keys and wake-up entries, queued delivery
jobs, outbox wake-ups, HOT updates on `deliveries`, and the CPU Herald's workers burn."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import aiohttp
import psutil
from prometheus_client.parser import text_string_to_metric_families

from app.core import queue
from app.flow.service.wakeups import Wakeups
from bench.stack import Stack

REGION = "local"


@dataclass(frozen=True)
class Counts:
    """How much state waiting work holds: in Redis, and as outbox wake-ups in PostgreSQL."""

    redis_keys: int  # DBSIZE
    wake_entries: int  # Σ entries over the region's tenants
    delivery_jobs: int  # arq jobs for deliveries in the queue: none (only an old API made them)
    outbox_rows: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


async def counts(stack: Stack) -> Counts:
    redis = queue.create_queue_redis(stack.redis_url, region=REGION)
    try:
        keys = int(await redis.dbsize())
        entries = await Wakeups(redis, REGION).count_entries()
        jobs = await redis.zrange(queue.queue_name(REGION), 0, -1)
    finally:
        await redis.aclose()
    # Reconcile and redrive jobs share the queue; delivery job ids start with the delivery's.
    delivery_jobs = sum(1 for job in jobs if job.startswith(b"dlv_"))
    outbox_rows = int(str(await stack.sql("SELECT count(*) FROM outbox_wakeups")))
    return Counts(keys, entries, delivery_jobs, outbox_rows)


async def delivery_updates(stack: Stack) -> tuple[int, int]:
    """(updates, HOT updates) of `deliveries` so far, as PostgreSQL's statistics have them.
    A backend publishes its counts when it goes idle (within about a second) or exits."""
    connection = await stack.connect()
    try:
        row = await connection.fetchrow(
            "SELECT sum(n_tup_upd)::bigint AS n_tup_upd, sum(n_tup_hot_upd)::bigint AS n_tup_hot_upd"
            " FROM pg_stat_user_tables"
            " WHERE relid IN (SELECT relid FROM pg_partition_tree('deliveries') WHERE isleaf)"
        )
    finally:
        await connection.close()
    assert row is not None
    return int(row["n_tup_upd"]), int(row["n_tup_hot_upd"])


# The workers' own counters (app/core/metrics.py) that say how the engine did its work.
ENGINE_COUNTERS = {
    "herald_claims": "claims",
    "herald_claimed_rows": "claimed_rows",
    "herald_record_flushes": "record_flushes",
    "herald_attempts": "attempts",
    "herald_flow_deferrals": "deferrals",
    "herald_leases_given_back": "leases_given_back",
}


async def engine_counters(stack: Stack) -> dict[str, float]:
    """The engine's counters summed over the running workers (each counts from its start);
    deferrals by reason as `deferrals:<reason>` too."""
    totals = dict.fromkeys(ENGINE_COUNTERS.values(), 0.0)
    async with aiohttp.ClientSession() as http:
        for url in stack.worker_metrics_urls():
            async with http.get(url) as response:
                text = await response.text()
            for family in text_string_to_metric_families(text):
                name = ENGINE_COUNTERS.get(family.name)
                if name is None:
                    continue
                for sample in family.samples:
                    if sample.name.endswith("_total"):
                        totals[name] += sample.value
                        if "reason" in sample.labels:
                            key = f"{name}:{sample.labels['reason']}"
                            totals[key] = totals.get(key, 0.0) + sample.value
    return totals


def counters_delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items()}


class CpuMeter:
    """CPU time the given processes use between start and stop, as % of one core. A process
    that has ended (a database backend) counts with what it had used when last read."""

    def __init__(self, processes: list[psutil.Process]) -> None:
        self.processes = processes
        self._last: dict[int, float] = {}
        self.started = time.perf_counter()
        self.cpu = self._cpu()

    def _cpu(self) -> float:
        for process in self.processes:
            try:
                times = process.cpu_times()
            except psutil.Error:
                continue
            self._last[process.pid] = times.user + times.system
        return sum(self._last.values())

    def seconds(self) -> float:
        """CPU seconds used since the start."""
        return self._cpu() - self.cpu

    def percent(self) -> float:
        return 100 * self.seconds() / (time.perf_counter() - self.started)
