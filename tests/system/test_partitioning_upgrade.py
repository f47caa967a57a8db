"""The upgrade to day partitions (migration 0040) on a database of a million deliveries, with
their events and attempts, while deliveries are accepted and delivered: real `herald api`,
`herald worker` and `herald migrate` processes.

A reader holds the events table for the whole run, as a long report would: the migration
converts the other tables, then cannot have the lock it needs on events. It waits for that
lock only a lock_timeout at a time, so accepts -- which write events -- go on while it
waits; cut short there (SIGKILL), it is run again once the reader is done and finishes what
is left. Every accept in the run is answered 202 and every accepted delivery succeeds.

The traffic is this release's API and worker, standing in for the release before (their
statements on these tables are the same; this release's keeper makes no partition of a table
that is not partitioned yet). Counted and ordered, never timed."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import asyncpg
import httpx
import pytest
from alembic import command

from app.core.migrate import alembic_config
from tests.fixtures.processes import (
    ApiProcess,
    herald_env,
    running_worker,
    start_api,
    wait_healthy,
)
from tests.fixtures.receiver import Receiver, running_receiver
from tests.fixtures.stack import ADMIN, SECRET_KEYS, Stack, plain_dsn, scratch_database
from tests.fixtures.waiting import eventually, until

REPO = Path(__file__).resolve().parents[2]
ROWS = 1_000_000
CONVERTED = ("deliveries", "attempts", "custody_records", "events")
PRODUCERS = 4
# The code under test is this release's, and it reads what the migrations after 0040 add (the
# record's functions, an endpoint column). Those are additive and touch nothing 0040 converts:
# they are applied to the old database ahead of it, and the migrate under test runs them again
# as no-ops (CREATE OR REPLACE, ADD COLUMN IF NOT EXISTS).
AHEAD = (
    *("0041", "0042", "0043", "0044", "0045", "0046", "0047", "0048", "0049"),
    *("0051", "0052", "0053"),
)

# ROWS finished deliveries made over the five days before now, with their events and attempts:
# what an installation that has run a while holds. Foreign-key checks are off for the load
# (the rows are consistent by construction): it is the set-up, not the subject.
_ID_AT = """
SET session_replication_role = replica;
CREATE FUNCTION pg_temp.id_at(prefix text, t timestamptz, n bigint) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT prefix || '_'
    || string_agg(substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ',
                         ((ms >> shift) & 31)::int + 1, 1), '' ORDER BY shift DESC)
    || lpad(n::text, 16, '0')
  FROM (SELECT (extract(epoch FROM t) * 1000)::bigint AS ms) AS m,
       generate_series(0, 45, 5) AS shift
$$
"""
_LOAD = """
WITH made AS (
    SELECT g, now() - interval '5 days' + (g::float8 / {rows}) * interval '4 days' AS t
      FROM generate_series(1, {rows}) AS g
), event AS (
    INSERT INTO events (id, tenant_id, event_type, payload, created_at)
    SELECT pg_temp.id_at('evt', t, g), $1, 'old', '\\x7b7d', t FROM made
), delivery AS (
    INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_type, region, state,
                            attempt_count, next_attempt_at, last_outcome, last_status_code,
                            created_at, updated_at, completed_at)
    SELECT pg_temp.id_at('dlv', t, g), $1, $2, pg_temp.id_at('evt', t, g), 'old', 'local',
           'succeeded', 1, t, 'success', 200, t, t, t
      FROM made
)
INSERT INTO attempts (delivery_id, endpoint_id, attempt_number, started_at, duration_ms,
                      status_code, outcome)
SELECT pg_temp.id_at('dlv', t, g), $2, 1, t, 5, 200, 'success' FROM made
"""


@dataclass
class Traffic:
    """Producers posting one delivery at a time until told to stop: every answer kept."""

    api: ApiProcess
    auth: dict[str, str]
    endpoint_id: str
    accepted: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def produce(self) -> None:
        body = {"endpoint_id": self.endpoint_id, "event_type": "new", "payload": {"n": 1}}
        async with httpx.AsyncClient(base_url=self.api.base_url, timeout=60) as http:
            while not self.stop.is_set():
                answer = await http.post("/v1/deliveries", json=body, headers=self.auth)
                if answer.status_code == 202:
                    self.accepted.append(answer.json()["id"])
                else:
                    self.refused.append(f"{answer.status_code} {answer.text}")

    async def more_accepted(self, count: int) -> None:
        """Until ``count`` more deliveries than now have been accepted."""
        target = len(self.accepted) + count

        async def reached() -> bool:
            assert self.refused == [], self.refused
            return len(self.accepted) >= target

        await until(reached, timeout=120)


@pytest.fixture
async def old_database(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> AsyncIterator[Stack]:
    """A database of its own at the revision before partitioning."""
    monkeypatch.setenv("HERALD_SECRET_KEYS", SECRET_KEYS)
    name = f"herald_upgrade_{os.getpid()}"
    url = await scratch_database(stack.database_url, name, create=True)
    try:
        await asyncio.to_thread(command.upgrade, alembic_config(url), "0039")
        connection = await asyncpg.connect(plain_dsn(url))
        try:
            for revision in AHEAD:
                for statement in _statements_of(revision):
                    await connection.execute(statement)
        finally:
            await connection.close()
        yield Stack(url, stack.redis_url, tmp_path)
    finally:
        await scratch_database(stack.database_url, name, create=False)


def _statements_of(revision: str) -> list[str]:
    """The SQL a migration's upgrade runs, as it would run it."""
    [path] = (REPO / "migrations" / "versions").glob(f"*-{revision}_*.py")
    spec = importlib.util.spec_from_file_location(f"ahead_{revision}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    said: list[str] = []
    op = SimpleNamespace(
        execute=said.append,
        get_context=lambda: SimpleNamespace(autocommit_block=contextlib.nullcontext),
    )
    setattr(module, "op", op)  # noqa: B010 -- its alembic op
    module.upgrade()
    return said


def migrate(old: Stack, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "app.cli", "migrate"],
            env=herald_env(old),
            cwd=REPO,
            stdout=output,
            stderr=subprocess.STDOUT,
        )


async def partitioned(connection: asyncpg.Connection) -> set[str]:
    rows = await connection.fetch(
        "SELECT relname FROM pg_class WHERE relname = ANY($1) AND relkind = 'p'", list(CONVERTED)
    )
    return {row["relname"] for row in rows}


async def legacy_ends(connection: asyncpg.Connection) -> list[str]:
    """The day each old table, now a partition, ends on (its upper bound's time)."""
    bounds = await connection.fetch(
        "SELECT pg_get_expr(relpartbound, oid) AS bounds FROM pg_class"
        " WHERE relname LIKE '%\\_legacy' AND relispartition AND relkind = 'r'"
    )
    return [row["bounds"].split("TO ('")[1][4:14] for row in bounds]


async def waits_for_events(connection: asyncpg.Connection) -> bool:
    """Whether a session waits right now for a lock on events that it has not been granted."""
    return bool(
        await connection.fetchval(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = to_regclass('events')"
        )
    )


async def test_a_million_deliveries_are_partitioned_online_and_resumably(
    old_database: Stack, tmp_path: Path
) -> None:
    old = old_database
    dsn = plain_dsn(old.database_url)
    watcher = await asyncpg.connect(dsn)
    reader = await asyncpg.connect(dsn)
    api = start_api(old, tmp_path)
    try:
        await wait_healthy(api)
        async with (
            running_receiver() as receiver,
            httpx.AsyncClient(base_url=api.base_url, timeout=60) as http,
        ):
            made = await http.post("/v1/tenants", json={"name": "upgrade"}, headers=ADMIN)
            auth = {"Authorization": f"Bearer {made.json()['api_key']}"}
            endpoint = await http.post(
                "/v1/endpoints", json={"url": receiver.url("/hook")}, headers=auth
            )
            assert endpoint.status_code == 201, endpoint.text
            tenant_id = await watcher.fetchval("SELECT id FROM tenants")
            await watcher.execute(_ID_AT)
            await watcher.execute(_LOAD.format(rows=ROWS), tenant_id, endpoint.json()["id"])
            await watcher.execute("RESET session_replication_role")
            await watcher.execute("VACUUM ANALYZE deliveries, events, attempts")
            assert await watcher.fetchval("SELECT count(*) FROM deliveries") == ROWS

            traffic = Traffic(api, auth, endpoint.json()["id"])
            with running_worker(old, tmp_path / "worker.log"):
                producers = [asyncio.create_task(traffic.produce()) for _ in range(PRODUCERS)]
                try:
                    await _upgrade_under(traffic, old, watcher, reader, tmp_path)
                finally:
                    traffic.stop.set()
                    await asyncio.gather(*producers)
                await _all_delivered(traffic, receiver, watcher)
    finally:
        api.stop()
        await reader.close()
        await watcher.close()


async def _upgrade_under(
    traffic: Traffic,
    old: Stack,
    watcher: asyncpg.Connection,
    reader: asyncpg.Connection,
    tmp_path: Path,
) -> None:
    await traffic.more_accepted(20)  # on the old shape

    # The reader holds events (ACCESS SHARE: it blocks no write, only DDL).
    held = reader.transaction()
    await held.start()
    await reader.execute("SELECT count(*) FROM events")
    first = migrate(old, tmp_path / "migrate.log")
    try:
        await until(lambda: _converted_but_events(watcher), timeout=300)
        await until(lambda: waits_for_events(watcher), timeout=60, every=0.005)
        # The migration is waiting for events, and accepts write events all the while.
        await traffic.more_accepted(30)
        assert first.poll() is None, (tmp_path / "migrate.log").read_text()
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert await partitioned(watcher) == {"deliveries", "attempts", "custody_records"}
    assert await watcher.fetchval("SELECT version_num FROM alembic_version") == "0039"
    await traffic.more_accepted(20)  # cut short, with three tables converted

    await held.rollback()
    second = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "app.cli", "migrate"],
        env=herald_env(old),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert second.returncode == 0, second.stdout + second.stderr
    assert "partitions made through" in second.stdout
    assert await partitioned(watcher) == set(CONVERTED)
    # The resumed run gave events the boundary the first run gave the others.
    ends = await legacy_ends(watcher)
    assert len(ends) == len(CONVERTED) and len(set(ends)) == 1, ends
    await traffic.more_accepted(30)  # on the new shape


async def _converted_but_events(watcher: asyncpg.Connection) -> bool:
    return await partitioned(watcher) == {"deliveries", "attempts", "custody_records"}


async def _all_delivered(traffic: Traffic, receiver: Receiver, watcher: asyncpg.Connection) -> None:
    assert traffic.refused == []
    accepted = set(traffic.accepted)

    async def unfinished() -> int:
        return int(
            await watcher.fetchval(
                "SELECT count(*) FROM deliveries WHERE id = ANY($1) AND state <> 'succeeded'",
                list(accepted),
            )
        )

    assert await eventually(unfinished, lambda count: count == 0, timeout=120) == 0
    seen = {r.headers["webhook-id"] for r in receiver.on("/hook")}
    assert accepted <= seen
    # Nothing old was lost, and the old rows are the old table's, now a partition.
    assert await watcher.fetchval("SELECT count(*) FROM deliveries_legacy") >= ROWS
    assert await watcher.fetchval("SELECT count(*) FROM deliveries") == ROWS + len(accepted)
    assert await watcher.fetchval("SELECT count(*) FROM attempts") >= ROWS + len(accepted)
