"""The deliveries table keeps state, completion time and dead reason in step, so that the
partial indexes of migration 0009 (keyed on ``completed_at`` and ``dead_reason``) hold exactly
the live, or the dead, rows -- and the queries that need them reach them."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import httpx
import pytest
from alembic import command
from sqlalchemy import event, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.core.config import Settings
from app.core.db import create_sessionmaker
from app.core.migrate import alembic_config
from app.core.queue import create_queue_redis
from app.core.states import DeliveryState
from app.delivery.repository import deliveries
from app.engine.repository import delivery_leases
from app.operations.service.fleet import FleetGauges
from tests.fixtures.api import fast_path_settled, post_deliveries
from tests.fixtures.stack import SECRET_KEYS, Stack, plain_dsn, scratch_database
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
                " SELECT 'evt_history' || lpad(g::text, 15, '0'), tenant_id, 'history',"
                "        CAST('{}' AS bytea)"
                "   FROM generate_series(1, 2000) AS g, endpoints WHERE endpoints.id = :ep"
                " RETURNING id, tenant_id)"
                " INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_type, region,"
                "                         state, next_attempt_at, completed_at)"
                " SELECT 'dlv' || substr(e.id, 4), e.tenant_id, :ep, e.id, 'history', :r,"
                "        'succeeded', now() - interval '1 day', now() - interval '1 day' FROM e"
            ),
            {"ep": endpoint_id, "r": region},
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


# The indexes that named `state`, which the contract migration (0010) dropped.
OLD_STATE_INDEXES = (
    "ix_deliveries_due",
    "ix_deliveries_enqueued",
    "ix_deliveries_leased",
    "ix_deliveries_dead",
    "ix_deliveries_tenant_state",
)


async def _reads_after_contract(engine: AsyncEngine, statement: str, parameters: Any) -> set[str]:
    """The indexes (and sequential scans of deliveries) a statement's plan reads."""
    async with engine.connect() as connection:
        result = await connection.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {statement}", parameters)
        raw = result.scalar_one()
    nodes = [(json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]]
    reads = set()
    while nodes:
        node = nodes.pop()
        if "Index Name" in node:
            reads.add(node["Index Name"])
        if node["Node Type"] == "Seq Scan" and node["Relation Name"] == "deliveries":
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
    assert await _reads_after_contract(engine, statement, parameters) == {
        "ix_deliveries_tenant_unfinished"
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
            await FleetGauges(sessionmaker, redis, settings.region, ttl=0).render()
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


# Rows older code or a hand could have left, by g % 5: finished without a completion time, dead
# without either, live with a stale completion time, live with a stale reason, and a sound dead
# row. Enough of them that the repair walks several batches.
_OLD_ROWS = """
INSERT INTO tenants (id, name) VALUES ('ten_old', 'old');
INSERT INTO endpoints (id, tenant_id, url, enabled, secret)
     VALUES ('ep_old', 'ten_old', 'http://127.0.0.1:9/', true, 'whsec_old');
INSERT INTO events (id, tenant_id, event_type, payload)
     SELECT 'evt_' || lpad(g::text, 8, '0'), 'ten_old', 'old', '{}'
       FROM generate_series(1, 12000) g;
INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_type, region, state,
                        next_attempt_at, updated_at, completed_at, dead_reason)
     SELECT 'dlv_' || lpad(g::text, 8, '0'), 'ten_old', 'ep_old', 'evt_' || lpad(g::text, 8, '0'),
            'old', 'local', (ARRAY['succeeded', 'dead', 'enqueued', 'pending', 'dead'])[g % 5 + 1],
            now(), now() - interval '1 day',
            CASE WHEN g % 5 IN (2, 4) THEN now() END,
            CASE WHEN g % 5 = 3 THEN 'stale' WHEN g % 5 = 4 THEN 'permanent_failure: HTTP 400' END
       FROM generate_series(1, 12000) g;
"""

_REPAIRED = """
SELECT count(*) FILTER (WHERE state = 'succeeded' AND completed_at = updated_at
                          AND dead_reason IS NULL) AS finished,
       count(*) FILTER (WHERE state = 'dead' AND completed_at = updated_at
                          AND dead_reason = 'unknown') AS dead_unknown,
       count(*) FILTER (WHERE state = 'dead' AND completed_at > updated_at
                          AND dead_reason = 'permanent_failure: HTTP 400') AS dead_kept,
       count(*) FILTER (WHERE state IN ('enqueued', 'pending') AND completed_at IS NULL
                          AND dead_reason IS NULL) AS live
  FROM deliveries
"""

NEW_INDEXES = {"ix_deliveries_live", "ix_deliveries_tenant_unfinished", "ix_deliveries_dead_since"}
NEW_CHECKS = {"ck_deliveries_finished", "ck_deliveries_dead_reason"}


# The valid indexes, the validated checks and the storage parameters of deliveries.
_SCHEMA = """
SELECT ARRAY(SELECT indexrelid::regclass::text FROM pg_index
              WHERE indrelid = 'deliveries'::regclass AND indisvalid) AS indexes,
       ARRAY(SELECT conname::text FROM pg_constraint
              WHERE conrelid = 'deliveries'::regclass AND contype = 'c' AND convalidated) AS checks,
       coalesce((SELECT reloptions FROM pg_class WHERE oid = 'deliveries'::regclass), '{}')
           AS options
"""


async def _on(dsn: str, sql: str) -> dict[str, Any]:
    """Run a script on its own connection; the row a final SELECT returns, arrays as sets."""
    connection = await asyncpg.connect(dsn)
    try:
        if not sql.lstrip().startswith("SELECT"):
            await connection.execute(sql)
            return {}
        row = await connection.fetchrow(sql)
        return {k: set(v) if isinstance(v, list) else v for k, v in row.items()}
    finally:
        await connection.close()


async def test_migration_0009_repairs_old_rows_and_goes_down_and_up_again(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERALD_SECRET_KEYS", SECRET_KEYS)  # 0023 seals the old rows' secrets
    name = f"herald_migration_{os.getpid()}"
    url = await scratch_database(stack.database_url, name, create=True)
    config, dsn = alembic_config(url), plain_dsn(url)
    try:
        await asyncio.to_thread(command.upgrade, config, "0008")
        await _on(dsn, _OLD_ROWS)

        await asyncio.to_thread(command.upgrade, config, "0009")
        assert await _on(dsn, _REPAIRED) == {
            "finished": 2400,
            "dead_unknown": 2400,
            "dead_kept": 2400,
            "live": 4800,
        }
        schema = await _on(dsn, _SCHEMA)
        assert schema["indexes"] >= NEW_INDEXES | set(OLD_STATE_INDEXES)
        assert schema["checks"] >= NEW_CHECKS
        assert schema["options"] == {"fillfactor=75", "autovacuum_vacuum_scale_factor=0.02"}

        await asyncio.to_thread(command.downgrade, config, "0008")
        schema = await _on(dsn, _SCHEMA)
        assert not NEW_INDEXES & schema["indexes"] and not NEW_CHECKS & schema["checks"]
        assert schema["indexes"] >= set(OLD_STATE_INDEXES) and schema["options"] == set()

        await asyncio.to_thread(command.upgrade, config, "head")
        schema = await _on(dsn, _SCHEMA)
        assert schema["indexes"] >= NEW_INDEXES and schema["checks"] >= NEW_CHECKS
        assert not set(OLD_STATE_INDEXES) & schema["indexes"]  # 0010, the contract
        assert len(schema["options"]) == 2

        await asyncio.to_thread(command.downgrade, config, "0009")
        assert (await _on(dsn, _SCHEMA))["indexes"] >= NEW_INDEXES | set(OLD_STATE_INDEXES)
    finally:
        await scratch_database(stack.database_url, name, create=False)


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
                "SELECT pg_stat_get_xact_tuples_updated('deliveries'::regclass),"
                " pg_stat_get_xact_tuples_hot_updated('deliveries'::regclass)"
            )
    finally:
        await connection.close()
    assert len(batch.rows) == 10
    assert (updated, hot) == (10, 10)


async def test_migrations_0024_and_0025_run_again_after_a_validate_cut_short(stack: Stack) -> None:
    """Their checks are validated outside the transaction, so an interruption there leaves the
    rest committed and the revision unstamped: running them again must simply finish."""
    name = f"herald_rerun_{os.getpid()}"
    url = await scratch_database(stack.database_url, name, create=True)
    config, dsn = alembic_config(url), plain_dsn(url)
    try:
        await asyncio.to_thread(command.upgrade, config, "head")
        await asyncio.to_thread(command.stamp, config, "0023")  # as if cut short after 0023
        await asyncio.to_thread(command.upgrade, config, "head")
        connection = await asyncpg.connect(dsn)
        try:
            checks = await connection.fetch(
                "SELECT conname, convalidated FROM pg_constraint WHERE conname = ANY($1)",
                [
                    "ck_endpoints_payload_format",
                    "ck_endpoints_signature_schemes",
                    "ck_attempts_outcome",
                    "ck_deliveries_outcome",
                ],
            )
        finally:
            await connection.close()
        assert {(c["conname"], c["convalidated"]) for c in checks} == {
            ("ck_endpoints_payload_format", True),
            ("ck_endpoints_signature_schemes", True),
            ("ck_attempts_outcome", True),
            ("ck_deliveries_outcome", True),
        }
    finally:
        await scratch_database(stack.database_url, name, create=False)
