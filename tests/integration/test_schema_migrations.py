"""Migrations of the tables run on real rows, and run again: 0009 repairs the deliveries older
code left, goes down and up again; the checks of 0024 and 0025, validated outside their
transaction, finish when run again after a validate cut short; 0035 keeps what the 1.0 outbox
had not published, once."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import asyncpg
import pytest
from alembic import command

from app.core.migrate import alembic_config
from tests.fixtures.stack import SECRET_KEYS, Stack, plain_dsn, scratch_database

# The indexes that named `state`, which the contract migration (0010) dropped.
OLD_STATE_INDEXES = (
    "ix_deliveries_due",
    "ix_deliveries_enqueued",
    "ix_deliveries_leased",
    "ix_deliveries_dead",
    "ix_deliveries_tenant_state",
)


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

        # Up to the last migration before partitioning (which is not undone: it has no way
        # down), and back.
        await asyncio.to_thread(command.upgrade, config, "0039")
        schema = await _on(dsn, _SCHEMA)
        assert schema["indexes"] >= NEW_INDEXES and schema["checks"] >= NEW_CHECKS
        assert not set(OLD_STATE_INDEXES) & schema["indexes"]  # 0010, the contract
        assert len(schema["options"]) == 2

        await asyncio.to_thread(command.downgrade, config, "0009")
        assert (await _on(dsn, _SCHEMA))["indexes"] >= NEW_INDEXES | set(OLD_STATE_INDEXES)
    finally:
        await scratch_database(stack.database_url, name, create=False)


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


# What a 1.0 API left in the outbox: unpublished rows for two deliveries to one endpoint, a
# published one to another. (Foreign keys off: the rows, not their neighbours, are the point.)
_OLD_OUTBOX = """
SET session_replication_role = replica;
INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_type, region, state,
                        next_attempt_at)
     SELECT 'dlv_' || repeat('0', 25) || n, 'ten_old', endpoint, 'evt_' || repeat('0', 25) || n,
            'old', 'local', state, due
       FROM (VALUES (1, 'ep_a', 'pending', now() - interval '1 minute'),
                    (2, 'ep_a', 'pending', now()),
                    (3, 'ep_b', 'enqueued', now())) AS old (n, endpoint, state, due);
INSERT INTO outbox (delivery_id, region, published_at)
     SELECT 'dlv_' || repeat('0', 25) || n, 'local', published
       FROM (VALUES (1, NULL), (2, NULL), (3, now())) AS old (n, published);
"""

_WAKEUPS = """
SELECT ARRAY(SELECT tenant_id || '/' || endpoint_id || '/' || (run_at < now() - interval '30 s')
               FROM outbox_wakeups) AS wakeups
"""


async def test_migration_0035_keeps_each_unpublished_outbox_row_as_its_destinations_wakeup(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERALD_SECRET_KEYS", SECRET_KEYS)
    name = f"herald_outbox_{os.getpid()}"
    url = await scratch_database(stack.database_url, name, create=True)
    config, dsn = alembic_config(url), plain_dsn(url)
    try:
        await asyncio.to_thread(command.upgrade, config, "0034")
        await _on(dsn, _OLD_OUTBOX)

        await asyncio.to_thread(command.upgrade, config, "head")
        # One wake-up for the destination with unpublished rows, for its earliest delivery;
        # none for what 1.0 had published.
        assert await _on(dsn, _WAKEUPS) == {"wakeups": {"ten_old/ep_a/true"}}

        await asyncio.to_thread(command.stamp, config, "0034")  # as if cut short after 0034
        await asyncio.to_thread(command.upgrade, config, "head")
        assert await _on(dsn, _WAKEUPS) == {"wakeups": {"ten_old/ep_a/true"}}  # not copied twice
    finally:
        await scratch_database(stack.database_url, name, create=False)
