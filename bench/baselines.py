"""The baselines Herald's figures are measured against, in the same run on the same servers:
pgbench running the statements of one accept, asyncpg running those of one batch, and a raw
aiohttp loop posting to the same receiver -- what PostgreSQL, or an HTTP client, does with
nothing of Herald around it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time

import aiohttp

from app.core.ids import new_id
from app.delivery.repository import intents
from app.outbox.repository import outbox
from bench.load import RECEIVERS, Client
from bench.stack import paced, percentile


async def pgbench(client: Client, clients: int, seconds: float, *, keyed: bool) -> float:
    script = client.stack.workdir / ("accept_keyed.sql" if keyed else "accept.sql")
    # The same statements as one POST /v1/deliveries: key lookup, then in one transaction
    # (keyed: the idempotency key's claim,) endpoint lookup, event, delivery and outbox
    # wake-up inserts.
    endpoint, tenant_id = client.endpoints["instant"], client.tenant_id
    # Ids of this millisecond with a random tail, as Herald's: they fall in today's partition.
    now = new_id("evt")[4:14]
    claim = (
        "INSERT INTO idempotency_keys (tenant_id, key, request_hash, resource_id,"
        f" response_status, expires_at) VALUES ('{tenant_id}', 'pgb' || :n,"
        f" sha256('x'::bytea), 'evt_{now}' || lpad(:n::text, 16, '0'), 202,"
        " now() + interval '24 hours')"
        " ON CONFLICT (tenant_id, key) DO UPDATE SET request_hash = excluded.request_hash"
        " WHERE idempotency_keys.expires_at <= now() RETURNING key;\n"
    )
    script.write_text(
        "\\set n random(1, 9999999999999999)\n"
        "SELECT tenant_id, is_admin FROM api_keys WHERE key_hash = sha256('x'::bytea)"
        " AND revoked_at IS NULL;\n"
        "BEGIN;\n"
        + (claim if keyed else "")
        + f"SELECT * FROM endpoints WHERE id = '{endpoint}' AND tenant_id = '{tenant_id}'"
        " AND deleted_at IS NULL;\n"
        # The days its payload is kept, as the accept decides them (its tenant's settings).
        "INSERT INTO events (id, tenant_id, event_type, payload, payload_days) VALUES"
        f" ('evt_{now}' || lpad(:n::text, 16, '0'), '{tenant_id}', 'bench',"
        f" '\\x7b226e223a317d', payload_days_of('{tenant_id}')) RETURNING payload_days;\n"
        "INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_type, region,"
        f" state, next_attempt_at, payload_days) VALUES ('dlv_{now}' || lpad(:n::text, 16, '0'),"
        f" '{tenant_id}', '{endpoint}', 'evt_{now}' || lpad(:n::text, 16, '0'), 'bench',"
        " 'local', 'pending', now(), 32767) RETURNING *;\n"
        "INSERT INTO outbox_wakeups (region, tenant_id, endpoint_id, run_at) VALUES"
        f" ('local', '{tenant_id}', '{endpoint}', now()) RETURNING id;\n"
        "COMMIT;\n"
    )
    result = await asyncio.to_thread(
        subprocess.run,
        [
            client.stack.pg_bin("pgbench"),
            *client.stack.pg_address(),
            "-U",
            "postgres",
            "-n",
            "-c",
            str(clients),
            "-j",
            "2",
            "-T",
            str(int(seconds)),
            "-f",
            str(script),
            "herald",
        ],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise RuntimeError(f"pgbench failed: {result.stderr[-2000:]}")
    for line in result.stdout.splitlines():
        if line.startswith("tps ="):
            return float(line.split()[2])
    raise RuntimeError(result.stdout)


async def batch_sql(client: Client, clients: int, batches: int) -> float:
    """The baseline: the statements one batch of 1000 makes PostgreSQL run -- the insert,
    then the publish's mark -- from asyncpg directly, with no HTTP and no Python around
    them, over as many connections as the batch figure has clients."""
    tenant_id, endpoint = client.tenant_id, client.endpoints["instant"]

    async def connection_inserting(count: int) -> None:
        connection = await client.stack.connect()
        try:
            for _ in range(count):
                events = [new_id("evt") for _ in range(1000)]
                async with connection.transaction():
                    rows = await connection.fetch(
                        intents.ACCEPT_MANY,
                        tenant_id,
                        "local",
                        events,
                        ["bench"] * 1000,
                        [b'{"n":1}'] * 1000,
                        [new_id("dlv") for _ in range(1000)],
                        [endpoint] * 1000,
                        [None] * 1000,
                        None,  # no traceparent
                        [None] * 1000,  # no ordering keys
                    )
                await outbox.mark_published(connection, list({r["outbox_id"] for r in rows}))
        finally:
            await connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(connection_inserting(batches // clients) for _ in range(clients)))
    return batches // clients * clients * 1000 / (time.perf_counter() - started)


async def raw_loop(receiver: str, total: int, concurrency: int) -> float:
    body = json.dumps({"n": 1}).encode()
    url, remaining = f"{RECEIVERS[receiver].url}/hook", total
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as raw:

        async def sender() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                async with raw.post(
                    url, data=body, headers={"Content-Type": "application/json"}
                ) as response:
                    await response.read()

        started = time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(concurrency)))
        return total / (time.perf_counter() - started)


async def raw_latency(client: Client, rate: float, seconds: float) -> dict[str, float]:
    """The receiver's own latency at ``rate``: the same paced loop as Herald's latency figure,
    each request posted straight to the receiver by aiohttp, timed from the send to the
    receiver's arrival on the same clock."""
    await client.reset_receiver("instant")
    url = f"{RECEIVERS['instant'].url}/hook"
    sent: dict[str, float] = {}
    async with aiohttp.ClientSession() as raw:

        async def one(n: int) -> None:
            key = f"raw-{n}"
            sent[key] = time.time()
            headers = {"Content-Type": "application/json", "webhook-id": key}
            async with raw.post(url, data=b"{}", headers=headers) as response:
                await response.read()

        await paced(rate, seconds, one)
    arrivals = await client.arrivals("instant")
    waits = [arrivals[key] - at for key, at in sent.items() if key in arrivals]
    return {"p50_ms": percentile(waits, 0.5) * 1000, "p99_ms": percentile(waits, 0.99) * 1000}
