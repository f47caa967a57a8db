"""The deliveries table keeps state, completion time and dead reason in step, so that the
partial indexes of migration 0009 (keyed on ``completed_at`` and ``dead_reason``) hold exactly
the live, or the dead, rows -- and the queries that need them reach them. (The migrations
themselves, run on old rows: test_schema_migrations.py.)"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.core.config import Settings
from app.core.db import create_sessionmaker
from app.core.ids import new_id
from app.core.queue import create_queue_redis
from app.core.replicas import Reads
from app.core.states import DeliveryState
from app.delivery.repository import deliveries
from app.engine.repository import delivery_leases
from app.operations.service.fleet import FleetGauges
from tests.fixtures.api import fast_path_settled, post_deliveries
from tests.fixtures.stack import Stack, plain_dsn
from tests.fixtures.waiting import delivery_row

CONTRADICTIONS = {
    "finished without completed_at": (
        "UPDATE deliveries SET state = 'succeeded' WHERE id = :d",
        "ck_deliveries_finished",
    ),
    "dead without a reason": (
        "UPDATE deliveries SET state = 'dead', completed_at = now() WHERE id = :d",
        "ck_deliveries_dead_reason",
    ),
    "live with completed_at": (
        "UPDATE deliveries SET completed_at = now() WHERE id = :d",
        "ck_deliveries_finished",
    ),
    "live with a dead reason": (
        "UPDATE deliveries SET dead_reason = 'gone' WHERE id = :d",
        "ck_deliveries_dead_reason",
    ),
}


@pytest.mark.parametrize("case", CONTRADICTIONS)
async def test_the_database_refuses_a_row_whose_columns_contradict_its_state(
    case: str,
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    [delivery_id] = await post_deliveries(client, tenant, endpoint["id"], 1)
    await fast_path_settled(engine)
    before = await delivery_row(engine, delivery_id)
    statement, constraint = CONTRADICTIONS[case]
    with pytest.raises(IntegrityError, match=constraint):
        async with engine.begin() as connection:
            await connection.execute(text(statement), {"d": delivery_id})
    assert await delivery_row(engine, delivery_id) == before


async def _finished_history(engine: AsyncEngine, endpoint_id: str, region: str) -> str:
    """2,000 succeeded deliveries on the endpoint, as a real table is mostly history: what a
    partial index over unfinished rows leaves out, and a full index has to read past. Returns
    the endpoint's tenant id."""
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "WITH e AS ("
                " INSERT INTO events (id, tenant_id, event_type, payload)"
                " SELECT 'evt_' || :now || lpad(g::text, 16, '0'), tenant_id, 'history',"
                "        CAST('{}' AS bytea)"
                "   FROM generate_series(1, 2000) AS g, endpoints WHERE endpoints.id = :ep"
                " RETURNING id, tenant_id)"
                " INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_type, region,"
                "                         state, next_attempt_at, completed_at)"
                " SELECT 'dlv' || substr(e.id, 4), e.tenant_id, :ep, e.id, 'history', :r,"
                "        'succeeded', now() - interval '1 day', now() - interval '1 day' FROM e"
            ),
            # Ids of this millisecond: the day's partition is where history is.
            {"ep": endpoint_id, "r": region, "now": new_id("evt")[4:14]},
        )
        await connection.execute(text("ANALYZE deliveries"))
        tenant_id = await connection.execute(
            text("SELECT tenant_id FROM endpoints WHERE id = :ep"), {"ep": endpoint_id}
        )
        return str(tenant_id.scalar_one())


async def _statement_of(
    engine: AsyncEngine, run: Callable[[async_sessionmaker[AsyncSession]], Awaitable[object]]
) -> tuple[str, Any]:
    """The SQL and parameters code sends about deliveries, exactly as sent."""
    sent: list[tuple[str, Any]] = []

    def seen(*args: Any) -> None:
        _, _, statement, parameters, _, _ = args
        if "FROM deliveries" in statement:
            sent.append((statement, parameters))

    event.listen(engine.sync_engine, "before_cursor_execute", seen)
    try:
        await run(create_sessionmaker(engine))
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", seen)
    [(statement, parameters)] = sent
    return statement, parameters


async def _reads_after_contract(engine: AsyncEngine, statement: str, parameters: Any) -> set[str]:
    """The indexes (and sequential scans of deliveries' rows) a statement's plan reads: each
    partition's index named by the table's index it is a partition of."""
    async with engine.connect() as connection:
        result = await connection.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {statement}", parameters)
        raw = result.scalar_one()
        nodes = [(json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]]
        reads = set()
        while nodes:
            node = nodes.pop()
            if "Index Name" in node:
                root = await connection.execute(
                    text(
                        "SELECT coalesce(pg_partition_root(oid), oid)::regclass::text FROM pg_class"
                        " WHERE relname = :index"
                    ),
                    {"index": node["Index Name"]},
                )
                reads.add(root.scalar_one())
            if node["Node Type"] == "Seq Scan" and node["Relation Name"].startswith("deliveries"):
                # A day ahead, still empty, is read whole at no cost: only a scan of rows counts.
                held = text("SELECT pg_relation_size(CAST(:r AS regclass)) > 0")
                if (await connection.execute(held, {"r": node["Relation Name"]})).scalar_one():
                    reads.add("seq scan of deliveries")
            nodes.extend(node.get("Plans", []))
    return reads


@pytest.mark.parametrize("state", [DeliveryState.ENQUEUED, DeliveryState.DEAD])
async def test_a_tenant_list_by_state_reads_the_unfinished_index(
    state: DeliveryState,
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
) -> None:
    await post_deliveries(client, tenant, endpoint["id"], 5)
    await fast_path_settled(engine)
    if state is DeliveryState.DEAD:
        async with engine.begin() as connection:
            await connection.execute(
                text(
                    "UPDATE deliveries SET state = 'dead', completed_at = now(),"
                    " dead_reason = 'permanent_failure: HTTP 400'"
                )
            )
    tenant_id = await _finished_history(engine, endpoint["id"], settings.region)

    async def list_page(sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        async with sessionmaker() as session:
            await deliveries.list_page(
                session,
                tenant_id,
                limit=51,
                before_id=None,
                state=state,
                endpoint_id=None,
                event_type=None,
            )

    statement, parameters = await _statement_of(engine, list_page)
    # A finished one is shown within the tenant's retention or as a halted stream's head: the
    # few halted heads are read from their own index.
    halted = {"ix_streams_halted_head"} if state is DeliveryState.DEAD else set()
    assert await _reads_after_contract(engine, statement, parameters) == {
        "ix_deliveries_tenant_unfinished",
        *halted,
    }


async def test_the_fleet_gauges_read_the_live_and_dead_indexes(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
) -> None:
    ids = await post_deliveries(client, tenant, endpoint["id"], 4)
    await fast_path_settled(engine)
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE deliveries SET state = 'dead', completed_at = now(),"
                " dead_reason = 'permanent_failure: HTTP 400' WHERE id = :d"
            ),
            {"d": ids[0]},
        )
    await _finished_history(engine, endpoint["id"], settings.region)

    async def render(sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        assert settings.redis_url is not None
        redis = create_queue_redis(settings.redis_url, region=settings.region)
        try:
            reads = Reads(sessionmaker, None, [], max_lag=5, probe_every=1)  # the primary alone
            await FleetGauges(reads, redis, settings.region, ttl=0).render()
        finally:
            await redis.aclose()

    statement, parameters = await _statement_of(engine, render)
    reads = await _reads_after_contract(engine, statement, parameters)
    assert {"ix_deliveries_live", "ix_deliveries_dead_since"} <= reads
    assert "seq scan of deliveries" not in reads


async def test_the_live_probe_of_a_destination_reads_the_live_index(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
) -> None:
    await post_deliveries(client, tenant, endpoint["id"], 5)
    await fast_path_settled(engine)
    await _finished_history(engine, endpoint["id"], settings.region)
    probe = (
        "SELECT id, state, next_attempt_at FROM deliveries"
        " WHERE region = $1 AND endpoint_id = $2 AND completed_at IS NULL"
        " ORDER BY next_attempt_at, id LIMIT 10"
    )
    assert await _reads_after_contract(engine, probe, (settings.region, endpoint["id"])) == {
        "ix_deliveries_live"
    }


async def test_a_claim_changes_no_indexed_column_so_it_is_a_hot_update(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    stack: Stack,
    settings: Settings,
) -> None:
    # No index names state, lease_token or lease_until any more (0010): a claim can stay on its
    # page. The statistics of the claim's own transaction say so, row by row.
    await post_deliveries(client, tenant, endpoint["id"], 10)
    await fast_path_settled(engine)
    connection = await asyncpg.connect(plain_dsn(stack.database_url))
    try:
        async with connection.transaction():
            batch = await delivery_leases.claim_batch(
                connection,
                region=settings.region,
                endpoint_id=endpoint["id"],
                limit=10,
                lease_seconds=30,
            )
            updated, hot = await connection.fetchrow(
                "SELECT sum(pg_stat_get_xact_tuples_updated(relid)),"
                " sum(pg_stat_get_xact_tuples_hot_updated(relid))"
                " FROM pg_partition_tree('deliveries') WHERE isleaf"
            )
    finally:
        await connection.close()
    assert len(batch.rows) == 10
    assert (updated, hot) == (10, 10)
