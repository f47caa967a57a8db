"""What a delivery costs the PostgreSQL primary, from its accept to a succeeded attempt: WAL bytes
and rows written, per delivery, for batches of 1,000 and for keyed single accepts, in the shape
users run (servers over TCP, Herald at its defaults, an instant receiver).

Rows are what pg_stat_user_tables counts (every tuple inserted, updated or deleted, HOT or not).
A backend publishes its counts when it exits or has been idle a while (up to ten seconds), so
each measure stops the workers and waits out that interval before it reads them. WAL is the
insert position's move over the same span: everything the primary logged meanwhile, full-page
images and the background's writes included, as a replica or an archive receives it."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from bench.load import Client, intents_for
from bench.stack import progress

# The tables a delivery writes on its way.
TABLES = ("events", "deliveries", "outbox_wakeups", "attempts", "idempotency_keys")
# A backend that has been idle this long has published its statistics.
STATS_FLUSHED_SECONDS = 11.0
SINGLE_CLIENTS = 16


async def measure(client: Client, batches: int, singles: int) -> dict[str, Any]:
    progress(f"write costs: {batches} batches of 1000, then {singles} keyed single accepts")
    items = intents_for(client.endpoints["instant"], 1000)
    batched = await _cost(client, batches * 1000, lambda: _batches(client, items, batches))
    single = await _cost(client, singles, lambda: _keyed_singles(client, singles))
    return {"batch_1000": batched, "single_keyed": single}


async def _batches(client: Client, items: list[dict[str, Any]], count: int) -> None:
    for _ in range(count):
        body = await client.post("/v1/deliveries/batch", {"items": items})
        assert body["accepted"] == len(items), body


async def _keyed_singles(client: Client, count: int) -> None:
    intent = {"endpoint_id": client.endpoints["instant"], "event_type": "bench", "payload": {}}
    remaining = iter(range(count))

    async def one_client() -> None:
        for _ in remaining:
            await client.post("/v1/deliveries", intent, **{"Idempotency-Key": uuid.uuid4().hex})

    await asyncio.gather(*(one_client() for _ in range(SINGLE_CLIENTS)))


async def _cost(client: Client, deliveries: int, accept: Any) -> dict[str, Any]:
    """Accept with no worker running, then deliver every one; the writes from first to last."""
    stack = client.stack
    stack.stop_workers()
    await stack.clean_slate()
    await client.reset_receiver("instant")
    await asyncio.sleep(STATS_FLUSHED_SECONDS)
    before = await _written(client)
    await accept()
    stack.start_workers()
    await client.wait_received("instant", deliveries)
    while await stack.sql("SELECT count(*) FROM deliveries WHERE state <> 'succeeded'"):
        await asyncio.sleep(0.1)
    stack.stop_workers()
    await asyncio.sleep(STATS_FLUSHED_SECONDS)
    after = await _written(client)
    rows = {
        table: {kind: (after["rows"][table][kind] - before["rows"][table][kind]) / deliveries
                for kind in ("inserted", "updated", "hot", "deleted")}
        for table in TABLES
    }  # fmt: skip
    return {
        "deliveries": deliveries,
        "wal_bytes_per_delivery": (after["wal"] - before["wal"]) / deliveries,
        "rows_per_delivery": sum(
            t["inserted"] + t["updated"] + t["deleted"] for t in rows.values()
        ),
        "by_table": rows,
    }


async def _written(client: Client) -> dict[str, Any]:
    connection = await client.stack.connect()
    try:
        wal = int(await connection.fetchval("SELECT pg_current_wal_insert_lsn()"))
        records = await connection.fetch(
            # A partitioned table's rows are counted in its partitions: summed by table.
            "SELECT relname, sum(n_tup_ins)::bigint AS n_tup_ins,"
            " sum(n_tup_upd)::bigint AS n_tup_upd, sum(n_tup_hot_upd)::bigint AS n_tup_hot_upd,"
            " sum(n_tup_del)::bigint AS n_tup_del FROM ("
            "   SELECT coalesce(pg_partition_root(relid)::regclass::text, relname) AS relname,"
            "          n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables"
            " ) AS counted WHERE relname = ANY($1::text[]) GROUP BY relname",
            list(TABLES),
        )
    finally:
        await connection.close()
    rows = {
        r["relname"]: {"inserted": r["n_tup_ins"], "updated": r["n_tup_upd"],
                       "hot": r["n_tup_hot_upd"], "deleted": r["n_tup_del"]}
        for r in records
    }  # fmt: skip
    return {"wal": wal, "rows": rows}
