"""Retention purges old terminal work in batches and never anything still live."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.db import create_sessionmaker
from app.core.ids import id_floor
from app.operations.service import retention
from tests.fixtures.api import new_endpoint
from tests.fixtures.processes import herald_env
from tests.fixtures.stack import Stack
from tests.fixtures.waiting import count_rows

DAYS_AGO_40 = datetime.now(UTC) - timedelta(days=40)
EVENT_SQL = "INSERT INTO events (id, tenant_id, event_type, payload) VALUES (:e, :t, 'a', '{}')"


async def old_delivery(
    engine: AsyncEngine,
    tenant_id: str,
    endpoint_id: str,
    n: int,
    state: str,
    completed_days: int | None,
) -> tuple[str, str]:
    """A delivery created 40 days ago (its time-ordered ids say so), with an attempt and a
    custody record."""
    moment = DAYS_AGO_40 + timedelta(milliseconds=n)
    event_id, delivery_id = id_floor("evt", moment), id_floor("dlv", moment)
    async with engine.begin() as connection:
        await connection.execute(
            text(EVENT_SQL),
            {"e": event_id, "t": tenant_id},
        )
        await connection.execute(
            text(
                "INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_type, region,"
                " state, next_attempt_at, completed_at, dead_reason) VALUES (:d, :t, :ep, :e,"
                " 'a', 'local', :s, now(), CASE WHEN CAST(:c AS int) IS NULL THEN NULL"
                " ELSE now() - make_interval(days => CAST(:c AS int)) END,"
                " CASE WHEN :s = 'dead' THEN 'permanent_failure: HTTP 400' END)"
            ),
            {
                "d": delivery_id,
                "t": tenant_id,
                "ep": endpoint_id,
                "e": event_id,
                "s": state,
                "c": completed_days,
            },
        )
        await connection.execute(
            text(
                "INSERT INTO attempts (delivery_id, endpoint_id, attempt_number, started_at,"
                " duration_ms, outcome) VALUES (:d, :ep, 1, now(), 5, 'success')"
            ),
            {"d": delivery_id, "ep": endpoint_id},
        )
        await connection.execute(
            text(
                "INSERT INTO custody_records (delivery_id, at, event, attempt_number)"
                " VALUES (:d, now(), 'redriven', 1)"
            ),
            {"d": delivery_id},
        )
    return delivery_id, event_id


async def test_purge_keeps_what_is_live_and_removes_what_is_old(
    client: httpx.AsyncClient, tenant: dict[str, str], settings: Settings, engine: AsyncEngine
) -> None:
    endpoint = await new_endpoint(client, tenant)
    async with engine.connect() as connection:
        tenant_id = (await connection.execute(text("SELECT id FROM tenants"))).scalar_one()
    succeeded = await old_delivery(engine, tenant_id, endpoint["id"], 1, "succeeded", 35)
    dead = await old_delivery(engine, tenant_id, endpoint["id"], 2, "dead", 31)
    pending = await old_delivery(engine, tenant_id, endpoint["id"], 3, "pending", None)
    recent = await old_delivery(engine, tenant_id, endpoint["id"], 4, "succeeded", 5)
    cancelled = await old_delivery(engine, tenant_id, endpoint["id"], 6, "cancelled", 33)
    orphan = id_floor("evt", DAYS_AGO_40 + timedelta(milliseconds=5))
    async with engine.begin() as connection:
        await connection.execute(
            text(EVENT_SQL),
            {"e": orphan, "t": tenant_id},
        )
        await connection.execute(
            text(
                "INSERT INTO idempotency_keys (tenant_id, key, request_hash, resource_id,"
                " response_status, expires_at) VALUES (:t, 'gone', '\\x00', 'x', 202, now() -"
                " interval '1 minute'), (:t, 'live', '\\x00', 'y', 202, now() + interval '1 hour')"
            ),
            {"t": tenant_id},
        )
        await connection.execute(
            text(
                "INSERT INTO reconcile_runs (id, region, trigger, status)"
                " VALUES (:r, 'local', 'cron', 'succeeded')"
            ),
            {"r": id_floor("run", DAYS_AGO_40)},
        )
        # The audit trail keeps its own time (HERALD_AUDIT_RETENTION_DAYS, 365 by default): a
        # change of 400 days ago goes, the endpoint's creation above stays.
        await connection.execute(
            text(
                "INSERT INTO audit_records (id, tenant_id, actor_kind, action)"
                " VALUES (:a, :t, 'cli', 'endpoint.created')"
            ),
            {"a": id_floor("aud", DAYS_AGO_40 - timedelta(days=360)), "t": tenant_id},
        )
    fresh = (
        await client.post(
            "/v1/deliveries",
            json={"endpoint_id": endpoint["id"], "event_type": "a", "payload": {}},
            headers=tenant,
        )
    ).json()["id"]

    counts = await retention.purge(settings, create_sessionmaker(engine))

    assert counts == {
        "dropped_days": 0,  # these are in the table from before partitioning, which is needed
        "dropped_payload_classes": 0,
        "purged_deliveries": 3,
        "purged_events": 4,
        "purged_keys": 1,
        "purged_runs": 1,
        "purged_portal_sessions": 0,
        "purged_audit_records": 1,
        "purged_transformations": 0,
    }
    async with engine.connect() as connection:
        left = set((await connection.execute(text("SELECT id FROM deliveries"))).scalars())
        events = set((await connection.execute(text("SELECT id FROM events"))).scalars())
    assert left == {pending[0], recent[0], fresh}
    assert succeeded[1] not in events and dead[1] not in events and orphan not in events
    assert cancelled[1] not in events
    assert pending[1] in events and recent[1] in events
    # Attempts and custody records went with their deliveries, and only theirs.
    for table in ("attempts", "custody_records"):
        kept = await count_rows(engine, table, "delivery_id = ANY(:d)", d=[pending[0], recent[0]])
        assert kept == 2 and await count_rows(engine, table) == kept
    assert await count_rows(engine, "idempotency_keys") == 1
    # The endpoint made above, not the change of 400 days ago.
    assert await count_rows(engine, "audit_records", "action = 'endpoint.created'") == 1


async def test_purge_in_small_batches_covers_everything(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    settings: Settings,
    engine: AsyncEngine,
    monkeypatch: Any,
) -> None:
    endpoint = await new_endpoint(client, tenant)
    async with engine.connect() as connection:
        tenant_id = (await connection.execute(text("SELECT id FROM tenants"))).scalar_one()
    for n in range(25):
        await old_delivery(engine, tenant_id, endpoint["id"], n, "succeeded", 35)
    monkeypatch.setattr(retention, "BATCH", 4)
    counts = await retention.purge(settings, create_sessionmaker(engine))
    assert counts["purged_deliveries"] == 25
    assert await count_rows(engine, "deliveries") == 0


async def test_herald_purge_command(stack: Stack) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.cli",
        "purge",
        env=herald_env(stack),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    assert out.decode().startswith("dropped_days=0 dropped_payload_classes=0 purged_deliveries=")


async def test_purge_keeps_a_dead_head_that_halts_its_stream(
    client: httpx.AsyncClient, tenant: dict[str, str], settings: Settings, engine: AsyncEngine
) -> None:
    endpoint = await new_endpoint(client, tenant, ordering="endpoint")
    async with engine.connect() as connection:
        tenant_id = (await connection.execute(text("SELECT id FROM tenants"))).scalar_one()
    halting, _ = await old_delivery(engine, tenant_id, endpoint["id"], 1, "dead", 35)
    await old_delivery(engine, tenant_id, endpoint["id"], 2, "dead", 35)
    # The first halts its stream (as the recorder leaves one); the second was skipped long ago.
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO streams (endpoint_id, stream, next_seq, head_id, head_since,"
                " halted_at) VALUES (:e, '', 3, :d, now(), now() - interval '35 days')"
            ),
            {"e": endpoint["id"], "d": halting},
        )

    counts = await retention.purge(settings, create_sessionmaker(engine))

    assert counts["purged_deliveries"] == 1
    async with engine.connect() as connection:
        left = set((await connection.execute(text("SELECT id FROM deliveries"))).scalars())
    assert left == {halting}
