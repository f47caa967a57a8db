"""Large backlogs written straight into PostgreSQL: reconcile after Redis lost everything (on
one destination, and spread over many), and a worker's memory beside a backlog."""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any

import psutil

from app.core.ids import new_id
from bench import probes
from bench.load import RECEIVERS, Client
from bench.stack import ADMIN_KEY, API, REPO, Stack, python


async def insert_backlog(
    stack: Stack,
    tenant_id: str,
    endpoints: list[str],
    count: int,
    *,
    state: str,
    due: str,
    outbox: bool,
) -> None:
    """``count`` deliveries in ``state``, dealt round the ``endpoints``, due at ``due`` (SQL);
    then Redis loses everything, as in an operator's accident."""
    now = new_id("evt")[4:14]  # ids of this millisecond: today's partitions
    connection = await stack.connect()
    try:
        await connection.execute("TRUNCATE outbox_wakeups, attempts, deliveries, events CASCADE")
        await connection.execute(
            "INSERT INTO events (id, tenant_id, event_type, payload) SELECT 'evt_' || $3 ||"
            " lpad(g::text, 16, '0'), $1, 'bench', '\\x7b7d' FROM generate_series(1, $2) g",
            tenant_id,
            count,
            now,
        )
        await connection.execute(
            "INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_type, region,"
            " state, next_attempt_at) SELECT 'dlv_' || $5 || lpad(g::text, 16, '0'),"
            " $1, ($2::text[])[1 + g % cardinality($2::text[])],"
            " 'evt_' || $5 || lpad(g::text, 16, '0'),"
            f" 'bench', 'local', $3, {due} FROM generate_series(1, $4) g",
            tenant_id,
            endpoints,
            state,
            count,
            now,
        )
        if outbox:
            # A wake-up per delivery, as that many single accepts with Redis down leave.
            await connection.execute(
                "INSERT INTO outbox_wakeups (region, tenant_id, endpoint_id, run_at, created_at)"
                " SELECT 'local', $1, ($2::text[])[1 + g % cardinality($2::text[])], now(),"
                " now() - interval '1 minute' FROM generate_series(1, $3) g",
                tenant_id,
                endpoints,
                count,
            )
        await connection.execute("ANALYZE")
    finally:
        await connection.close()
    await stack.flush_redis()


async def reconcile(client: Client, rows: int, destinations: int) -> dict[str, Any]:
    """One reconcile run over ``rows`` due `enqueued` deliveries on ``destinations`` endpoints
    after Redis was flushed: its time, its memory growth, and what it put back: one wake-up
    entry per destination."""
    stack = client.stack
    stack.stop_workers()
    endpoints = [client.endpoints["instant"]]
    if destinations > 1:
        endpoints = await many_endpoints(client, destinations)
    await insert_backlog(
        stack,
        client.tenant_id,
        endpoints,
        rows,
        state="enqueued",
        due="now() - interval '1 hour'",
        outbox=False,
    )
    result = await reconcile_once(stack, HERALD_RECONCILE_MAX_ROWS="1000000")
    after = await probes.counts(stack)
    # What the run repaired, counted in Redis: every destination is armed again, or the figure
    # did not measure a whole repair.
    repaired = after.wake_entries
    await stack.clean_slate()
    return {
        "rows": rows,
        "destinations": destinations,
        **result,
        "repaired": repaired,
        "complete": repaired == destinations,
    }


async def reconcile_once(stack: Stack, **env: str) -> dict[str, Any]:
    """One reconcile run (retention with it) in a process of its own, with ``env`` beside the
    stack's settings: its time, memory growth, status and counts."""
    out = await asyncio.to_thread(
        subprocess.run,
        python("bench/reconcile_once.py"),
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env=stack.env(**env),
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


async def many_endpoints(client: Client, count: int) -> list[str]:
    """``count`` endpoints on the instant receiver (created once, kept for later runs)."""
    known = client.endpoints_spread
    receiver = RECEIVERS["instant"]
    missing = count - len(known)
    if missing > 0:
        # The operator lets the bench's tenant have that many (its default is 100).
        async with client.http.patch(
            f"{API}/v1/tenants/{client.tenant_id}/limits",
            json={"max_endpoints": count + 100, "max_endpoints_per_customer": count + 100},
            headers={"Authorization": f"Bearer {ADMIN_KEY}"},
        ) as answer:
            assert answer.status == 200, await answer.text()
    for start in range(0, missing, 50):
        known += await asyncio.gather(
            *(client.create_endpoint(receiver) for _ in range(min(50, missing - start)))
        )
    return known[:count]


async def worker_rss(client: Client, count: int) -> float:
    """RSS of one worker (MB) after its relay has published a backlog of ``count`` rows."""
    stack = client.stack
    stack.stop_workers()
    await insert_backlog(
        stack,
        client.tenant_id,
        [client.endpoints["instant"]],
        count,
        state="pending",
        due="now() + interval '1 day'",
        outbox=True,
    )
    stack.start_workers(count=1)
    while await stack.sql("SELECT count(*) FROM outbox_wakeups"):
        await asyncio.sleep(0.5)
    await asyncio.sleep(1)
    rss = float(psutil.Process(stack.processes["worker0"].pid).memory_info().rss) / 2**20
    stack.stop_workers()
    return rss
