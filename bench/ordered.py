"""Ordered delivery: many streams against the same work unordered; one stream
against the best it could be -- one request-and-answer, then the record that hands the stream
on, one after the other, with nothing between; and halted streams, which should cost nothing
while they wait."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from statistics import median
from typing import Any

from app.core.db import create_engine, create_sessionmaker
from app.core.states import DeliveryState
from app.engine.repository.delivery_leases import ClaimedDelivery
from app.engine.repository.delivery_records import Finished, Recording
from app.engine.service import record_writes
from app.streams.service.heads import StreamKey
from bench import baselines
from bench.load import RECEIVERS, Client
from bench.parking import idle_cpu, waiting_window
from bench.stack import percentile

# Deliveries a record baseline times, one after the other.
RECORDS = 200


def keyed_items(endpoint_id: str, keys: int, per_key: int) -> list[dict[str, Any]]:
    """``per_key`` intents for each of ``keys`` ordering keys, the keys interleaved (round by
    round), as many producers writing at once would send them."""
    return [
        {
            "endpoint_id": endpoint_id,
            "event_type": "bench",
            "payload": {"n": n},
            "ordering_key": f"key-{k}",
        }
        for n in range(per_key)
        for k in range(keys)
    ]


async def reorders(client: Client, endpoint_id: str, receiver: str) -> int:
    """Deliveries that reached the receiver before one numbered ahead of them in their stream
    (by first arrival): 0 when every stream arrived in order."""
    arrivals = await client.arrivals(receiver)
    connection = await client.stack.connect()
    try:
        rows = await connection.fetch(
            "SELECT id, stream FROM deliveries WHERE endpoint_id = $1 ORDER BY stream, stream_seq",
            endpoint_id,
        )
    finally:
        await connection.close()
    out_of_order = 0
    for _, stream in itertools.groupby(rows, key=lambda row: row["stream"]):
        times = [arrivals[row["id"]] for row in stream]
        out_of_order += sum(1 for a, b in itertools.pairwise(times) if b < a)
    return out_of_order


async def many_keys(client: Client, keys: int, per_key: int) -> dict[str, Any]:
    """``keys`` x ``per_key`` deliveries to one endpoint ordering by key, against the same
    number to an unordered endpoint at the same receiver, the same way (accepted with no
    worker running, then delivered)."""
    total = keys * per_key
    ordered_endpoint = await client.create_endpoint(RECEIVERS["instant"], ordering="key")
    unordered = await client.end_to_end("instant", total)
    ordered = await client.end_to_end(
        "instant", total, keyed_items(ordered_endpoint, keys, per_key)
    )
    client.stack.stop_workers()
    return {
        "keys": keys,
        "per_key": per_key,
        **ordered,
        "unordered_per_second": unordered["per_second"],
        "ratio": ordered["per_second"] / unordered["per_second"],
        "reorders": await reorders(client, ordered_endpoint, "instant"),
    }


async def one_key(client: Client, deliveries: int) -> dict[str, Any]:
    """One stream of ``deliveries`` to an instant receiver: the rate from the first request to
    the last answer, and the gap between an answer and the next request, against one raw
    request-and-answer plus one record of Herald's, one after the other."""
    stack = client.stack
    endpoint_id = await client.create_endpoint(RECEIVERS["instant"], ordering="endpoint")
    items = [
        {"endpoint_id": endpoint_id, "event_type": "bench", "payload": {"n": n}}
        for n in range(deliveries)
    ]
    run = await client.end_to_end("instant", deliveries, items)
    stats = await client.wait_answered("instant")
    stack.stop_workers()
    span = stats["last_end"] - stats["first_start"]
    arrivals = await client.arrivals("instant")
    order = await stack.connect()
    try:
        ids = [
            row["id"]
            for row in await order.fetch(
                "SELECT id FROM deliveries WHERE endpoint_id = $1 ORDER BY stream_seq",
                endpoint_id,
            )
        ]
    finally:
        await order.close()
    starts = [arrivals[i] for i in ids]
    between = [b - a for a, b in itertools.pairwise(starts)]
    raw_per_second = await baselines.raw_loop("instant", deliveries, 1)
    record_seconds = await record_baseline(client, continuing=False)
    continuing_seconds = await record_baseline(client, continuing=True)
    best = 1 / (1 / raw_per_second + record_seconds)
    per_second = (deliveries - 1) / span
    return {
        "deliveries": deliveries,
        "per_second": per_second,
        "wall_per_second": run["per_second"],
        # Σ (next request's start - this answer's end) / gaps: the time the stream waits on
        # Herald, not on its receiver.
        "mean_gap_ms": 1000 * (span - stats["busy_seconds"]) / (deliveries - 1),
        "start_to_start_p50_ms": 1000 * percentile(between, 0.5),
        "start_to_start_p99_ms": 1000 * percentile(between, 0.99),
        "raw_per_second": raw_per_second,
        "record_ms": 1000 * record_seconds,
        # The record a continuing worker commits: the next head leased in it as well.
        "record_leasing_ms": 1000 * continuing_seconds,
        "best_per_second": best,
        "ratio": per_second / best,
        "ratio_to_leasing_record": per_second / (1 / (1 / raw_per_second + continuing_seconds)),
        "max_in_flight_seen": stats["max_concurrent"],
        "reorders": await reorders(client, endpoint_id, "instant"),
    }


class _Continue:
    """Go on with the given streams, as a worker continuing them does."""

    def __init__(self, streams: Sequence[StreamKey]) -> None:
        self.streams = list(streams)

    def continued_streams(self) -> list[StreamKey]:
        return self.streams


async def record_baseline(client: Client, *, continuing: bool) -> float:
    """The median time of one record of Herald's that ends an ordered head and hands its
    stream on (``record_writes.write_batch``, as the recorder calls it) -- ``continuing``:
    leasing the next head in the same transaction, as a worker that goes on with the stream
    does -- timed from this process over RECORDS heads of one stream, each leased first
    (untimed) as a claim would, unless the record before leased it."""
    stack = client.stack
    stack.stop_workers()
    await stack.clean_slate()
    endpoint_id = await client.create_endpoint(RECEIVERS["instant"], ordering="endpoint")
    await client.accept_items(
        [
            {"endpoint_id": endpoint_id, "event_type": "bench", "payload": {}}
            for _ in range(RECORDS + 1)
        ]
    )
    engine = create_engine(stack.database_url)
    sessionmaker = create_sessionmaker(engine)
    connection = await stack.connect()
    timings = []
    try:
        leased: list[ClaimedDelivery] = []
        for _ in range(RECORDS):
            if leased:
                head, token = leased[0].id, leased[0].token
            else:
                token = uuid.uuid4()
                head = await connection.fetchval(
                    "UPDATE deliveries AS d SET state = 'leased', lease_token = $2,"
                    " lease_until = now() + interval '1 minute', attempt_count = 1"
                    " FROM streams AS s WHERE s.endpoint_id = $1 AND d.id = s.head_id"
                    " RETURNING d.id",
                    endpoint_id,
                    token,
                )
            finished = Finished(
                DeliveryState.SUCCEEDED,
                None,
                None,
                1,
                outcome="success",
                status_code=200,
                started_at=datetime.now(UTC),
                duration_ms=1,
            )
            started = time.perf_counter()
            written = await record_writes.write_batch(
                sessionmaker,
                [(Recording(head, token, finished), StreamKey(endpoint_id, ""))],
                continuing=_Continue([StreamKey(endpoint_id, "")]) if continuing else None,
                lease_seconds=60,
            )
            timings.append(time.perf_counter() - started)
            assert written.recorded == {head} and len(written.new_heads) == 1, written
            leased = written.leased
            assert len(leased) == (1 if continuing else 0), written
    finally:
        await connection.close()
        await engine.dispose()
    return median(timings)


async def halted(client: Client, keys: int, per_key: int, seconds: float) -> dict[str, Any]:
    """``keys`` streams whose heads died at a receiver that refuses everything and halt them,
    ``per_key - 1`` deliveries waiting behind each, while cron calls reconcile every 2 s: the
    same window as parking's."""
    stack = client.stack
    stack.stop_workers()
    await stack.clean_slate()
    await client.reset_receiver("refusing")
    endpoint_id = await client.create_endpoint(RECEIVERS["refusing"], ordering="key")
    stack.start_workers()
    idle = await idle_cpu(client)
    await client.accept_items(keyed_items(endpoint_id, keys, per_key))
    deadline = time.monotonic() + 120
    halted_sql = "SELECT count(*) FROM streams WHERE halted_at IS NOT NULL"
    while int(str(await stack.sql(halted_sql))) < keys:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{keys} streams did not halt within 120 s")
        await asyncio.sleep(0.2)
    await asyncio.sleep(1)  # every worker has seen the work once
    window = await waiting_window(client, "refusing", seconds)
    stack.stop_workers()
    return {
        "streams": keys,
        "waiting": keys * (per_key - 1),
        "idle_worker_cpu_percent": idle,
        **window,
    }
