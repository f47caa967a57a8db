"""Reads from a streaming replica under the accept and delivery load.

A standby of the bench's PostgreSQL is made as an operator makes one (``pg_basebackup -R``) and
named in HERALD_DATABASE_REPLICA_URLS. While producers post single intents and the workers
deliver them, readers ask the status of deliveries accepted earlier and list the newest; each
producer also asks the status of the delivery it was just told was accepted. Counted: the reads
the replica answered (by the answer's Herald-Read-Lag, and by the transactions the replica ran
beyond its probes), and every 404 for an id just accepted -- there must be none.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from bench.load import Client
from bench.stack import API, progress
from devstack.tcp_servers import TcpPostgres

REPLICA_PORT = 8962
PRODUCERS = 8
READERS = 16
LAG = "Herald-Read-Lag"


async def _transactions(url: str) -> int:
    import asyncpg

    connection = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        count: int = await connection.fetchval(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = 'herald'"
        )
        return count
    finally:
        await connection.close()


class _Tally:
    def __init__(self) -> None:
        self.by_replica: dict[str, int] = {}
        self.total: dict[str, int] = {}
        self.statuses: dict[int, int] = {}
        self.stale_404 = 0

    def count(self, kind: str, status: int, headers: Any) -> None:
        self.total[kind] = self.total.get(kind, 0) + 1
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if LAG in headers:
            self.by_replica[kind] = self.by_replica.get(kind, 0) + 1


async def _until_usable(client: Client, deadline: float = 60) -> None:
    ends = time.monotonic() + deadline
    while time.monotonic() < ends:
        async with client.http.get(
            f"{API}/v1/deliveries", params={"limit": "1"}, headers=client.tenant
        ) as answer:
            await answer.read()
            if LAG in answer.headers:
                return
        await asyncio.sleep(0.2)
    raise RuntimeError("the replica never became usable")


async def _load(client: Client, seconds: float) -> _Tally:
    tally = _Tally()
    accepted: list[str] = []
    deadline = time.perf_counter() + seconds
    body = {"endpoint_id": client.endpoints["instant"], "event_type": "bench", "payload": {"n": 1}}

    async def producer() -> None:
        while time.perf_counter() < deadline:
            async with client.http.post(
                f"{API}/v1/deliveries", json=body, headers=client.tenant
            ) as answer:
                delivery_id = (await answer.json())["id"]
            accepted.append(delivery_id)
            async with client.http.get(
                f"{API}/v1/deliveries/{delivery_id}", headers=client.tenant
            ) as answer:
                await answer.read()
                tally.count("just accepted", answer.status, answer.headers)
                tally.stale_404 += answer.status == 404

    async def reader(n: int) -> None:
        while time.perf_counter() < deadline:
            if n % 4 == 0 or not accepted:
                url, kind = f"{API}/v1/deliveries", "listing"
            else:
                url, kind = f"{API}/v1/deliveries/{random.choice(accepted)}", "status"
            async with client.http.get(url, headers=client.tenant) as answer:
                await answer.read()
                tally.count(kind, answer.status, answer.headers)

    await asyncio.gather(
        *(producer() for _ in range(PRODUCERS)), *(reader(n) for n in range(READERS))
    )
    return tally


async def replica_reads(client: Client, seconds: float, results: dict[str, Any]) -> None:
    stack = client.stack
    if not isinstance(stack.postgres, TcpPostgres):
        return  # a standby is made of the system servers only
    progress("replica reads: a standby by pg_basebackup -R, then accepts, deliveries and reads")
    standby = TcpPostgres(stack.postgres.bin_dir, stack.workdir / "standby", REPLICA_PORT)
    try:
        standby = await asyncio.to_thread(
            stack.postgres.standby, stack.workdir / "standby", REPLICA_PORT
        )
        stack.stop("api")
        await stack.start_api(HERALD_DATABASE_REPLICA_URLS=standby.url)
        stack.start_workers()
        await stack.wait_workers_idle()
        await _until_usable(client)
        # The replica's own transactions while idle: the API processes' probes.
        idle_from = await _transactions(standby.url)
        await asyncio.sleep(seconds / 3)
        probes_per_second = (await _transactions(standby.url) - idle_from) / (seconds / 3)
        before = await _transactions(standby.url)
        started = time.perf_counter()
        tally = await _load(client, seconds)
        elapsed = time.perf_counter() - started
        on_replica = await _transactions(standby.url) - before - probes_per_second * elapsed
    finally:
        stack.stop_workers()
        stack.stop("api")
        await stack.start_api()
        await asyncio.to_thread(standby.stop)
    later = sum(tally.total.get(k, 0) for k in ("status", "listing"))
    results["replica_reads"] = {
        "seconds": elapsed,
        "reads": tally.total,
        "by_replica": tally.by_replica,
        "share_of_status_and_listings": sum(
            tally.by_replica.get(k, 0) for k in ("status", "listing")
        )
        / max(later, 1),
        "replica_transactions_beyond_probes": on_replica,
        "statuses": tally.statuses,
        "stale_404": tally.stale_404,
    }
