"""A delivery's path with a long history behind it: single accepts (keyed and not), delivery
(the claim and the record) and the status by id, first on an empty database, then with
``rows`` finished deliveries -- their events and attempts with them -- loaded behind them by
``generate_series`` into the day partitions they would have filled, each figure beside its
empty-database self in one run. Then what retiring a day of that history costs, both ways in
the same run: one day dropped whole, the next day's rows deleted by retention's batches, each
timed with the WAL it writes."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import text

from app.core.db import create_engine, create_sessionmaker
from app.core.ids import id_floor
from app.operations.repository import partitions as partition_rows
from app.operations.repository import retention as retention_rows
from app.operations.service import partitions, retention
from bench import backlog
from bench.load import Client, intents_for
from bench.stack import API, percentile, progress

HISTORY_DAYS = 30
# Finished history a statement loads: each is its own transaction, so progress shows.
LOAD_CHUNK = 1_000_000

# An id of ``prefix`` made at ``t``: the ULID time digits of its millisecond (as
# app/core/ids.py makes them) and 16 digits that make it unique (``n``, in decimal: digits are
# Crockford digits too).
_ID_FUNCTION = """
CREATE OR REPLACE FUNCTION bench_id(prefix text, t timestamptz, n bigint) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT prefix || '_'
    || substr(a, ((ms >> 45) & 31)::int + 1, 1) || substr(a, ((ms >> 40) & 31)::int + 1, 1)
    || substr(a, ((ms >> 35) & 31)::int + 1, 1) || substr(a, ((ms >> 30) & 31)::int + 1, 1)
    || substr(a, ((ms >> 25) & 31)::int + 1, 1) || substr(a, ((ms >> 20) & 31)::int + 1, 1)
    || substr(a, ((ms >> 15) & 31)::int + 1, 1) || substr(a, ((ms >> 10) & 31)::int + 1, 1)
    || substr(a, ((ms >> 5) & 31)::int + 1, 1) || substr(a, (ms & 31)::int + 1, 1)
    || lpad(n::text, 16, '0')
  FROM (SELECT (extract(epoch FROM t) * 1000)::bigint AS ms,
               '0123456789ABCDEFGHJKMNPQRSTVWXYZ' AS a) AS digits
$$
"""

# Rows $1..$2 of the history: the n-th is made at an even step from $6 (the start of a day)
# to now, to one of the endpoints $4 (tenant $3), and succeeded on its first attempt a second
# later. An event and its delivery share their millisecond: siblings, as Herald mints them.
_LOAD = """
WITH made AS (
    SELECT g, $6::timestamptz + (g::float8 / $5) * (now() - $6::timestamptz) AS t,
           ($4::text[])[1 + g % cardinality($4::text[])] AS endpoint
      FROM generate_series($1::bigint, $2::bigint) AS g
), event AS (
    INSERT INTO events (id, tenant_id, event_type, payload, created_at)
    SELECT bench_id('evt', t, g), $3, 'bench', '\\x7b226e223a317d', t FROM made
), delivery AS (
    INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_type, region, state,
                            attempt_count, next_attempt_at, last_outcome, last_status_code,
                            created_at, updated_at, completed_at)
    SELECT bench_id('dlv', t, g), $3, endpoint, bench_id('evt', t, g), 'bench', 'local',
           'succeeded', 1, t, 'success', 200, t, t + interval '1 second',
           t + interval '1 second'
      FROM made
)
INSERT INTO attempts (delivery_id, endpoint_id, attempt_number, started_at, duration_ms,
                      status_code, outcome)
SELECT bench_id('dlv', t, g), endpoint, 1, t, 5, 200, 'success' FROM made
"""


async def measure(
    client: Client, rows: int, accept_seconds: float, deliveries: int
) -> dict[str, Any]:
    stack = client.stack
    endpoints = [client.endpoints["instant"], *await backlog.many_endpoints(client, 50)]
    await stack.clean_slate()
    empty = await _path(client, accept_seconds, deliveries)
    progress(f"history: loading {rows:,} finished deliveries over {HISTORY_DAYS} days")
    started = time.perf_counter()
    await _load(client, rows, endpoints)
    loaded_seconds = time.perf_counter() - started
    full = await _path(client, accept_seconds, deliveries)
    progress("history: retiring a day, dropped and deleted")
    retired = await _retire_a_day(client)
    await stack.clean_slate()
    return {
        "rows": rows,
        "load_seconds": loaded_seconds,
        "empty": empty,
        "full": full,
        "retire_one_day": retired,
    }


def _first_day() -> datetime:
    today = datetime.combine(datetime.now(UTC).date(), datetime.min.time(), UTC)
    return today - timedelta(days=HISTORY_DAYS)


async def _days_behind(client: Client) -> None:
    """The partitions of the history's days, as an installation that has run HISTORY_DAYS
    since partitioning has them: the empty tables from before partitioning (the migration made
    them the partitions of every day before it ran) give way to a partition a day."""
    engine = create_engine(client.stack.database_url, pool_size=1)
    try:
        async with engine.begin() as connection:
            for spec in partition_rows.TABLES:
                legacy = f"{spec.table}_legacy"
                exists = await connection.execute(text(f"SELECT to_regclass('{legacy}')"))
                if exists.scalar_one() is None:
                    continue
                held = await connection.execute(text(f"SELECT EXISTS (SELECT FROM {legacy})"))
                if not held.scalar_one():
                    await connection.execute(text(f"DROP TABLE {legacy}"))
            first = _first_day()
            await partition_rows.make_days(
                connection,
                [first.date() + timedelta(days=n) for n in range(HISTORY_DAYS + 1)],
                classes=[1],  # no tenant keeps its payloads shorter: one table a day
                lock_timeout_ms=10_000,
            )
            # Every delivery from the history's first day on is its event's sibling.
            await connection.execute(
                text(
                    "CREATE OR REPLACE FUNCTION deliveries_siblings_from() RETURNS text"
                    " LANGUAGE sql IMMUTABLE PARALLEL SAFE AS"
                    f" $$ SELECT text '{id_floor('dlv', first)}' $$"
                )
            )
    finally:
        await engine.dispose()


async def _load(client: Client, rows: int, endpoints: list[str]) -> None:
    await _days_behind(client)
    connection = await client.stack.connect()
    try:
        await connection.execute(_ID_FUNCTION)
        for first in range(1, rows + 1, LOAD_CHUNK):
            last = min(first + LOAD_CHUNK - 1, rows)
            await connection.execute(
                _LOAD, first, last, client.tenant_id, endpoints, rows, _first_day()
            )
            progress(f"history: {last:,} of {rows:,} loaded")
        await connection.execute("VACUUM ANALYZE deliveries, events, attempts")
    finally:
        await connection.close()


async def _path(client: Client, accept_seconds: float, deliveries: int) -> dict[str, Any]:
    """The figures of one database: accepts (32 clients, unkeyed and keyed), delivery, and the
    status of deliveries picked at random from everything there."""
    stack = client.stack
    stack.stop_workers()
    figures: dict[str, Any] = {}
    for keyed in (False, True):
        name = "accept_32" + ("_keyed" if keyed else "")
        progress(f"history: {name}")
        figures[name] = await client.accept(32, accept_seconds, keyed=keyed)
    progress(f"history: {deliveries} deliveries delivered")
    await client.reset_receiver("instant")
    await client.accept_items(intents_for(client.endpoints["instant"], deliveries))
    started = time.perf_counter()
    stack.start_workers()
    await client.wait_received("instant", deliveries)
    figures["deliver_per_second"] = deliveries / (time.perf_counter() - started)
    await stack.wait_workers_idle()
    stack.stop_workers()
    figures["status_by_id"] = await _status_by_id(client, seconds=accept_seconds)
    return figures


async def _status_by_id(client: Client, *, seconds: float, clients: int = 32) -> dict[str, Any]:
    """GET /v1/deliveries/{id} of ids sampled from the whole table (TABLESAMPLE: cheap, and
    spread over the history as well as today)."""
    ids = [
        str(row)
        for row in json.loads(
            str(
                await client.stack.sql(
                    "SELECT coalesce(json_agg(id), '[]') FROM (SELECT id FROM deliveries"
                    " TABLESAMPLE SYSTEM (1) LIMIT 2000) AS sampled"
                )
            )
        )
    ]
    if not ids:
        ids = [str(await client.stack.sql("SELECT id FROM deliveries LIMIT 1"))]
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def one_client() -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            async with client.http.get(
                f"{API}/v1/deliveries/{random.choice(ids)}", headers=client.tenant
            ) as response:
                await response.read()
                assert response.status == 200, response.status
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(one_client() for _ in range(clients)))
    return {
        "per_second": len(latencies) / (time.perf_counter() - started),
        "p50_ms": percentile(latencies, 0.5) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
    }


async def _retire_a_day(client: Client) -> dict[str, Any]:
    """The history's first day retired as retention does it, its partitions detached and
    dropped; then the second day's rows (as many, the history being even) deleted as
    retention deletes rows of a day it must hold, in batches of retention.BATCH. Each timed
    whole, with the WAL it writes (what every replica receives)."""
    stack = client.stack
    first = _first_day()
    second, third = first + timedelta(days=1), first + timedelta(days=2)
    engine = create_engine(stack.database_url, pool_size=2)
    try:
        # A minute's slack: the day's last rows finished a second into the next.
        dropped_rows = await _rows_between(client, first, second)
        dropped = await _timed_with_wal(
            client, lambda: partitions.retire_days(engine, second + timedelta(minutes=1))
        )
        sessionmaker = create_sessionmaker(engine)

        async def delete_in_batches() -> int:
            batches = 0
            while True:
                batches += 1
                async with sessionmaker() as session, session.begin():
                    purged, _ = await retention_rows.purge_deliveries(
                        session, region="local", before=third, limit=retention.BATCH
                    )
                if purged < retention.BATCH:
                    return batches

        deleted_before = await _rows_between(client, second, third)
        deleted = await _timed_with_wal(client, delete_in_batches)
        deleted_rows = deleted_before - await _rows_between(client, second, third)
    finally:
        await engine.dispose()
    return {
        "drop": {**dropped, "rows": dropped_rows, "days": dropped["result"]},
        "delete": {**deleted, "rows": deleted_rows, "batches": deleted["result"]},
    }


async def _rows_between(client: Client, start: datetime, end: datetime) -> int:
    return int(
        str(
            await client.stack.sql(
                "SELECT count(*) FROM deliveries WHERE id >= $1 AND id < $2",
                id_floor("dlv", start),
                id_floor("dlv", end),
            )
        )
    )


async def _timed_with_wal(client: Client, work: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    wal_before = int(str(await client.stack.sql("SELECT pg_current_wal_insert_lsn() - '0/0'")))
    started = time.perf_counter()
    result = await work()
    seconds = time.perf_counter() - started
    wal_after = int(str(await client.stack.sql("SELECT pg_current_wal_insert_lsn() - '0/0'")))
    return {"seconds": seconds, "wal_mb": (wal_after - wal_before) / 2**20, "result": result}
