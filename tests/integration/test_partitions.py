"""Day partitions: made ahead, once each; every row filed in its own day; found again."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.db import create_sessionmaker, single_statements
from app.core.ids import id_floor, sibling_id
from app.delivery.repository import intents
from app.operations.repository import retention as retention_rows
from app.operations.repository import retirements
from app.operations.repository.partitions import TABLES, name_of
from app.operations.service import partitions
from app.operations.service.partitions import PartitionKeeper
from tests.fixtures.api import new_endpoint
from tests.fixtures.processes import clean_env
from tests.fixtures.stack import Stack

REPO = Path(__file__).resolve().parents[2]
RETENTION = Settings.model_fields["retention_days"].default


async def _partition_names(engine: AsyncEngine) -> set[str]:
    return {p.name for p in await partitions.listing(engine)}


async def _drop(engine: AsyncEngine, names: list[str]) -> None:
    async with engine.begin() as connection:
        for name in names:
            await connection.execute(text(f"DROP TABLE IF EXISTS {name}"))


async def test_herald_connections_plan_without_jit(engine: AsyncEngine) -> None:
    """Over a fortnight of partitions the claim's cost estimate passes the JIT thresholds,
    and compiling it cost seconds a claim (docs/benchmarks.md): JIT is off per connection."""
    async with engine.connect() as connection:
        assert (await connection.execute(text("SHOW jit"))).scalar_one() == "off"


async def test_the_days_ahead_are_made_once_each(engine: AsyncEngine) -> None:
    later = datetime.now(UTC) + timedelta(days=60)  # days no one has made yet
    days = [later.date() + timedelta(days=n) for n in range(4)]
    wanted = [name_of(t.table, day) for t in TABLES for day in days]
    try:
        assert await partitions.make_ahead(engine, 3, RETENTION, now=later) == len(wanted)
        assert await partitions.make_ahead(engine, 3, RETENTION, now=later) == 0
        assert set(wanted) <= await _partition_names(engine)
        async with engine.connect() as connection:
            options = await connection.execute(
                text("SELECT relname, reloptions FROM pg_class WHERE relname = ANY(:n)"),
                {"n": [name_of("deliveries", day) for day in days]},
            )
            # Each deliveries day has room on its pages for a batch's claims (HOT updates).
            assert {tuple(row.reloptions) for row in options} == {
                ("fillfactor=50", "autovacuum_vacuum_scale_factor=0.02")
            }
    finally:
        await _drop(engine, wanted)


async def test_an_api_process_makes_the_days_it_finds_missing(engine: AsyncEngine) -> None:
    tomorrow = datetime.now(UTC).date() + timedelta(days=1)
    missing = [name_of(t.table, tomorrow + timedelta(days=n)) for t in TABLES for n in range(3)]
    await _drop(engine, missing)
    assert not set(missing) & await _partition_names(engine)

    await PartitionKeeper(
        engine, ahead_days=14, retention_days=RETENTION
    ).ready()  # what an accept awaits first

    assert set(missing) <= await _partition_names(engine)


async def test_a_keeper_that_failed_waits_a_while_before_it_tries_again(
    engine: AsyncEngine,
) -> None:
    keeper = PartitionKeeper(engine, ahead_days=14, retention_days=RETENTION)
    await keeper.ready()
    last = name_of("events", datetime.now(UTC).date() + timedelta(days=14))
    await _drop(engine, [last])
    # As if the days made were running out: the next accept makes more.
    keeper._ready_until = datetime.now(UTC) + timedelta(hours=12)
    try:
        async with engine.connect() as holder:
            # DDL on events in the way: the attach gives up after its lock timeout.
            await holder.execute(text("LOCK TABLE events IN SHARE UPDATE EXCLUSIVE MODE"))
            await keeper.ready()  # today is covered: the accept goes on
            await holder.rollback()
        assert last not in await _partition_names(engine)
        await keeper.ready()  # the way is clear, but the retry waits: no accept queues on it
        assert last not in await _partition_names(engine)
    finally:
        await partitions.make_ahead(engine, 14, RETENTION)


async def test_an_event_at_a_days_last_millisecond_keeps_its_deliveries_in_that_day(
    engine: AsyncEngine, settings: Settings, endpoint: dict[str, Any]
) -> None:
    await partitions.make_ahead(engine, 3, RETENTION)
    midnight = datetime.combine(datetime.now(UTC).date() + timedelta(days=1), time(), UTC)
    last_of_today = id_floor("evt", midnight - timedelta(milliseconds=1))[:14] + "A" * 16
    first_of_tomorrow = id_floor("evt", midnight)
    filed = {}
    async with engine.connect() as connection:
        tenant_id = (
            await connection.execute(
                text("SELECT tenant_id FROM endpoints WHERE id = :e"), {"e": endpoint["id"]}
            )
        ).scalar_one()
    for event_id in (last_of_today, first_of_tomorrow):
        async with single_statements(create_sessionmaker(engine)) as connection:
            inserted = await intents.insert_for_endpoint(
                connection,
                tenant_id=tenant_id,
                endpoint_id=endpoint["id"],
                event_id=event_id,
                event_type="a.b",
                payload=b"{}",
                delivery_id=sibling_id("dlv", event_id),
                region=settings.region,
                deliver_after=None,
                traceparent=None,
            )
        assert inserted.delivery is not None
        async with engine.connect() as connection:
            rows = await connection.execute(
                text(
                    "SELECT d.tableoid::regclass::text AS delivery, coalesce("
                    # a day of events made partitioned by payload class: its day's table
                    "  (SELECT inhparent::regclass::text FROM pg_inherits"
                    "    WHERE inhrelid = e.tableoid AND inhparent <> 'events'::regclass),"
                    "  e.tableoid::regclass::text) AS event"
                    " FROM deliveries AS d JOIN events AS e ON e.id = d.event_id"
                    " WHERE d.id = :d"
                ),
                {"d": inserted.delivery["id"]},
            )
            filed[event_id] = tuple(rows.one())
    today, tomorrow = midnight.date() - timedelta(days=1), midnight.date()
    assert filed == {
        last_of_today: (name_of("deliveries", today), name_of("events", today)),
        first_of_tomorrow: (name_of("deliveries", tomorrow), name_of("events", tomorrow)),
    }


async def test_an_events_deliveries_are_found_by_their_ids_alone(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    for _ in range(3):
        await new_endpoint(client, tenant, event_types=["a.b"])
    accepted = await client.post(
        "/v1/events", json={"event_type": "a.b", "payload": {}}, headers=tenant
    )
    assert accepted.status_code == 202, accepted.text
    event = accepted.json()
    listed = await client.get("/v1/deliveries", params={"event_id": event["id"]}, headers=tenant)
    fanned_out = sorted(d["id"] for d in event["deliveries"])
    assert len(fanned_out) == 3
    assert sorted(d["id"] for d in listed.json()["items"]) == fanned_out
    # Each carries its event's millisecond: the same ten digits after the prefix.
    assert {d[4:14] for d in fanned_out} == {event["id"][4:14]}


def test_herald_partitions_lists_each_day_with_its_size(stack: Stack) -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "app.cli", "partitions", "--make"],
        env=clean_env(HERALD_DATABASE_URL=stack.database_url),
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    today = datetime.now(UTC).date()
    assert shown[0].split() == ["partition", "from", "until", "rows", "(est.)", "size"]
    row = next(line.split() for line in shown if line.startswith(name_of("deliveries", today)))
    assert row[1:3] == [today.isoformat(), (today + timedelta(days=1)).isoformat()]
    assert row[-1] in {"B", "kB", "MB"}
    assert shown[-1].startswith("made ")


async def _old_delivery(
    engine: AsyncEngine,
    endpoint: dict[str, Any],
    day: datetime,
    state: str,
    hour: int = 1,
    **columns: Any,
) -> str:
    """A delivery of ``day`` (its ids say so), made at ``hour``, with its event, one attempt and
    a custody record: what a day holds."""
    event_id = id_floor("evt", day + timedelta(hours=hour))[:14] + "B" * 16
    delivery_id = sibling_id("dlv", event_id)
    finished = state in {"succeeded", "dead"}
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO events (id, tenant_id, event_type, payload)"
                " SELECT :e, tenant_id, 'a.b', CAST('{}' AS bytea) FROM endpoints WHERE id = :ep"
            ),
            {"e": event_id, "ep": endpoint["id"]},
        )
        await connection.execute(
            text(
                "INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_type, region,"
                " state, attempt_count, next_attempt_at, completed_at, dead_reason, stream,"
                " stream_seq) SELECT :d, tenant_id, id, :e, 'a.b', 'local', :s, 1, now(),"
                " CAST(:c AS timestamptz), :reason, :stream, :seq FROM endpoints WHERE id = :ep"
            ),
            {
                "d": delivery_id,
                "e": event_id,
                "ep": endpoint["id"],
                "s": state,
                "c": columns.get("completed_at", datetime.now(UTC) if finished else None),
                "reason": "permanent_failure: HTTP 400" if state == "dead" else None,
                "stream": columns.get("stream"),
                "seq": 1 if columns.get("stream") is not None else None,
            },
        )
        await connection.execute(
            text(
                "INSERT INTO attempts (delivery_id, endpoint_id, attempt_number, started_at,"
                " duration_ms, outcome) VALUES (:d, :ep, 1, now(), 5, 'success')"
            ),
            {"d": delivery_id, "ep": endpoint["id"]},
        )
        await connection.execute(
            text(
                "INSERT INTO custody_records (delivery_id, at, event, attempt_number)"
                " VALUES (:d, now(), 'redriven', 1)"
            ),
            {"d": delivery_id},
        )
    return delivery_id


async def test_a_day_past_retention_is_dropped_whole_and_a_needed_one_kept(
    engine: AsyncEngine, client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    # Days ahead stand in for days past: retention is asked as of a week from now.
    await partitions.make_ahead(engine, 14, RETENTION)
    today = datetime.combine(datetime.now(UTC).date(), time(), UTC)
    # A run that crossed midnight has days before today (empty: every test starts on empty
    # tables), which the retirement below drops too.
    yesterdays = [
        p
        for p in await partitions.listing(engine)
        if p.parent == "deliveries"
        and p.lower is not None
        and p.upper is not None
        and p.upper <= id_floor("dlv", today)
    ]
    day = {n: today + timedelta(days=n) for n in range(1, 7)}
    # Older than partitioning, and still waiting: the table from before is kept for it.
    waiting = await _old_delivery(engine, endpoint, today - timedelta(days=40), "pending")
    done = await _old_delivery(engine, endpoint, day[2], "succeeded")
    retried = await _old_delivery(engine, endpoint, day[3], "enqueued")
    beside = await _old_delivery(engine, endpoint, day[3], "succeeded", hour=2)
    head = await _old_delivery(engine, endpoint, day[4], "dead", stream="")
    await sql_statement(
        engine,
        "INSERT INTO streams (endpoint_id, stream, next_seq, head_id, head_since, halted_at)"
        " VALUES (:ep, '', 2, :h, now(), now())",
        ep=endpoint["id"],
        h=head,
    )
    before = day[6]
    late = await _old_delivery(
        engine, endpoint, day[5], "succeeded", completed_at=before + timedelta(hours=1)
    )
    accepted = await client.post(
        "/v1/deliveries",
        json={"endpoint_id": endpoint["id"], "event_type": "a.b", "payload": {}},
        headers=tenant,
    )
    assert accepted.status_code == 202

    try:
        # Tomorrow (empty) and the day after go; today has a delivery waiting.
        assert await partitions.retire_days(engine, before) == 2 + len(yesterdays)

        names = await _partition_names(engine)
        gone = {name_of(t.table, day[n].date()) for t in TABLES for n in (1, 2)}
        kept = {name_of(t.table, day[n].date()) for t in TABLES for n in (3, 4, 5)}
        assert not gone & names and kept <= names
        async with engine.connect() as connection:
            left = set((await connection.execute(text("SELECT id FROM deliveries"))).scalars())
            attempts = set(
                (await connection.execute(text("SELECT delivery_id FROM attempts"))).scalars()
            )
        assert left == {waiting, retried, beside, head, late, accepted.json()["id"]}
        assert {t.table + "_legacy" for t in TABLES} <= names
        assert done not in attempts and {retried, beside, head, late} <= attempts

        # What in a day held back may go, goes by the batch: with its event, found by its id
        # (no index on event_id past the old table), while the waiting neighbour keeps its own.
        async with create_sessionmaker(engine)() as session, session.begin():
            purged = await retention_rows.purge_deliveries(
                session, region="local", before=before, limit=500
            )
        assert purged == (1, 1)
        async with engine.connect() as connection:
            left = set((await connection.execute(text("SELECT id FROM deliveries"))).scalars())
            events = set((await connection.execute(text("SELECT id FROM events"))).scalars())
        assert beside not in left and retried in left
        assert _event_of(beside) not in events and _event_of(retried) in events
    finally:
        await partitions.make_ahead(
            engine, 14, RETENTION
        )  # the day dropped, back for the tests after


async def test_a_retirement_cut_short_is_mended_and_loses_nothing(
    engine: AsyncEngine, endpoint: dict[str, Any]
) -> None:
    await partitions.make_ahead(engine, 14, RETENTION)
    today = datetime.combine(datetime.now(UTC).date(), time(), UTC)
    day = {n: today + timedelta(days=n) for n in range(1, 6)}
    waiting = await _old_delivery(engine, endpoint, day[2], "enqueued")
    # Older than partitioning, and waiting: the table from before stays for the tests after.
    await _old_delivery(engine, endpoint, today - timedelta(days=40), "pending")
    found = {p.name: p for p in await partitions.listing(engine)}
    try:
        # A detach cut short in its second transaction (an old snapshot held it past a
        # timeout): the day is left half-detached, and what it holds is hidden.
        async with engine.connect() as snapshot, engine.connect() as pooled:
            retiring = await pooled.execution_options(isolation_level="AUTOCOMMIT")
            await snapshot.execute(text("SELECT count(*) FROM deliveries"))
            await retiring.execute(text("SET statement_timeout = '300ms'"))
            with pytest.raises(DBAPIError):
                await retirements.detach(retiring, found[name_of("deliveries", day[2])])
            await retiring.execute(text("RESET statement_timeout"))
            await snapshot.rollback()
            # And a day's events detached whole, by a process that died before dropping them.
            await retirements.detach(retiring, found[name_of("events", day[3])])
        assert waiting not in await _delivery_ids(engine)

        assert await partitions.retire_days(engine, day[5]) == 4  # today, days 1, 3 and 4

        names = await _partition_names(engine)
        assert waiting in await _delivery_ids(engine)
        assert {name_of(t.table, day[2]) for t in TABLES} <= names
        assert not {name_of(t.table, day[n]) for t in TABLES for n in (1, 3, 4)} & names
        async with engine.connect() as connection:
            strays = await connection.execute(
                text("SELECT count(*) FROM pg_class WHERE relname = :n"),
                {"n": name_of("events", day[3])},
            )
        assert strays.scalar_one() == 0
    finally:
        await partitions.make_ahead(engine, 14, RETENTION)


async def _delivery_ids(engine: AsyncEngine) -> set[str]:
    async with engine.connect() as connection:
        return set((await connection.execute(text("SELECT id FROM deliveries"))).scalars())


def _event_of(delivery_id: str) -> str:
    """The event ``_old_delivery`` made this delivery a sibling of."""
    return "evt_" + delivery_id[4:14] + "B" * 16


async def sql_statement(engine: AsyncEngine, statement: str, **params: Any) -> None:
    async with engine.begin() as connection:
        await connection.execute(text(statement), params)
