"""deliveries, events, attempts and custody records partitioned by day

Each table becomes range-partitioned by a time-ordered id: deliveries and events by their own,
attempts and custody records by their delivery's. Nothing is copied. The table as it stands
becomes the partition of every id below a boundary -- the start of the day after tomorrow, so
that no id minted before this commits can be past it -- and the week from the boundary on gets
day partitions in the same swap (Herald makes the days after: `herald migrate` right after
this, reconcile and each API process; the week covers processes of the release before, which
make none, through a rolling upgrade). One boundary for all four tables: a run resumed on a
later day takes the one the first table was given (``deliveries_siblings_from()``).

Online, per table: a CHECK (key < boundary) is added NOT VALID and validated while writes go
on; then one short transaction renames the table, creates the partitioned parent in its place,
attaches the old table under the CHECK (no scan), and attaches its indexes to the parent's
(metadata only). Every step takes its lock under a short lock_timeout and is retried, so
that traffic never queues behind it for longer; a table already partitioned is skipped, so a
run cut short is run again.

What does not carry over: the unique (event_id, endpoint_id) of deliveries stays on the old
partition alone (a unique index must hold the partition key; an event's deliveries are its
siblings in id, found by primary key), custody records are keyed (delivery_id, id), and the
foreign keys among these tables go (a key into a partitioned table cost 26 times an insert, and
would forbid dropping a day).

Revision ID: 0040
Revises: 0039
Create Date: 2026-12-08 14:00:00+00:00
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import NamedTuple

import asyncpg
from alembic import op
from sqlalchemy.util import await_only

revision: str = "0040"
down_revision: str | None = "0039"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LOCK_TIMEOUT = "200ms"
TRIES = 100
# The validation and the index build read the whole table while writes go on: on a large one
# they take minutes, past the 30 s every Herald statement is otherwise given.
LONG_STATEMENT_S = 24 * 3600.0
# Day partitions made in each swap, from the boundary on.
DAYS_MADE = 7


class Conversion(NamedTuple):
    table: str
    key: str
    prefix: str
    # Indexes left on the old partition alone (and dropped with it).
    legacy_only: tuple[str, ...] = ()
    identity: bool = False
    storage: str = ""  # each partition's own (the parent takes none)


CONVERSIONS = (
    # First: it drops the foreign keys into deliveries, which would otherwise point at the old
    # partition and refuse every attempt of a delivery minted past the boundary.
    Conversion(
        "deliveries",
        "id",
        "dlv",
        legacy_only=("uq_deliveries_event_endpoint",),
        storage="fillfactor = 50, autovacuum_vacuum_scale_factor = 0.02",
    ),
    Conversion("attempts", "delivery_id", "dlv", identity=True),
    Conversion(
        "custody_records",
        "delivery_id",
        "dlv",
        legacy_only=("ix_custody_records_delivery",),
        identity=True,
    ),
    Conversion("events", "id", "evt"),
)


def _driver() -> asyncpg.Connection:
    return op.get_bind().connection.driver_connection


def _run(sql: str, *, timeout: float | None = None) -> None:
    await_only(_driver().execute(sql, timeout=timeout))


def _fetch(sql: str, *args: object) -> list[asyncpg.Record]:
    rows: list[asyncpg.Record] = await_only(_driver().fetch(sql, *args))
    return rows


def _atomically(statements: list[str]) -> None:
    """One transaction under the short lock_timeout, tried again while a lock is not had."""
    script = "\n".join(
        ["BEGIN;", f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}';", *statements, "COMMIT;"]
    )
    for attempt in range(TRIES):
        try:
            _run(script)
            return
        except asyncpg.exceptions.LockNotAvailableError:
            _run("ROLLBACK")
            time.sleep(min(0.05 * (attempt + 1), 1.0))
    raise RuntimeError(f"could not take the locks in {TRIES} tries: run `herald migrate` again")


def _is_partitioned(table: str) -> bool:
    return bool(_fetch("SELECT 1 FROM pg_class WHERE relname = $1 AND relkind = 'p'", table))


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _day(prefix: str, days: int) -> tuple[str, str]:
    """The first id of a UTC day ``days`` after today (app/core/ids.py's id_floor) and the
    day's partition suffix (app/operations/repository/partitions.py's name_of)."""
    [row] = _fetch(
        "SELECT (extract(epoch FROM day) * 1000)::bigint AS ms, to_char(day, 'YYYYMMDD') AS name"
        " FROM (SELECT date_trunc('day', now() AT TIME ZONE 'UTC') + make_interval(days => $1)"
        " AS day) AS d",
        days,
    )
    ms, digits = int(row["ms"]), ""
    for shift in range(45, -1, -5):
        digits += _CROCKFORD[(ms >> shift) & 31]
    return f"{prefix}_{digits}{'0' * 16}", str(row["name"])


def _boundary_day() -> int:
    """The boundary, in days after today, for every table. A run resumed after the first
    swap keeps the boundary it gave (deliveries go first, and define
    ``deliveries_siblings_from()``); otherwise today when no table has a row yet (a new
    installation: every day is a partition), else the day after tomorrow."""
    if _is_partitioned("deliveries"):
        [row] = _fetch(
            "SELECT substr(deliveries_siblings_from(), 5, 10) AS time,"
            " (now() AT TIME ZONE 'UTC')::date AS today"
        )
        ms = 0
        for digit in str(row["time"]):
            ms = ms * 32 + _CROCKFORD.index(digit)
        days: int = (datetime.fromtimestamp(ms / 1000, UTC).date() - row["today"]).days
        return days
    populated = any(_fetch(f"SELECT FROM {c.table} LIMIT 1") for c in CONVERSIONS)
    return 2 if populated else 0


def _convert(c: Conversion, first: int) -> None:
    legacy = f"{c.table}_legacy"
    boundary, _ = _day(c.prefix, first)
    if _fetch(f"SELECT FROM {c.table} WHERE {c.key} >= $1 LIMIT 1", boundary):
        # A run resumed after the boundary's day began: this table has rows past it, and
        # takes a boundary of its own (docs/decisions.md, "Tables partitioned by day").
        first = 2
        boundary, _ = _day(c.prefix, first)
    cutover = f"{c.table}_before_cutover"
    if c.table == "custody_records" and _fetch(
        "SELECT 1 FROM pg_index WHERE indexrelid = 'pk_custody_records'::regclass AND indnatts = 1"
    ):
        # A partitioned table's key must hold its partition key: (delivery_id, id), built
        # beside the old key while writes go on, then made the key.
        _run("DROP INDEX CONCURRENTLY IF EXISTS custody_records_delivery_key")
        _run(
            "CREATE UNIQUE INDEX CONCURRENTLY custody_records_delivery_key"
            " ON custody_records (delivery_id, id)",
            timeout=LONG_STATEMENT_S,
        )
        _atomically(
            [
                "ALTER TABLE custody_records DROP CONSTRAINT pk_custody_records;",
                "ALTER TABLE custody_records ADD CONSTRAINT pk_custody_records"
                " PRIMARY KEY USING INDEX custody_records_delivery_key;",
            ]
        )
    _atomically(
        [
            f"ALTER TABLE {c.table} DROP CONSTRAINT IF EXISTS {cutover};",
            f"ALTER TABLE {c.table} ADD CONSTRAINT {cutover}"
            f" CHECK ({c.key} < '{boundary}') NOT VALID;",
        ]
    )
    # Writes go on meanwhile.
    _run(f"ALTER TABLE {c.table} VALIDATE CONSTRAINT {cutover}", timeout=LONG_STATEMENT_S)

    indexes = _fetch(
        "SELECT i.relname AS name, pg_get_indexdef(i.oid) AS definition,"
        " x.indisprimary AS is_primary, pg_get_constraintdef(k.oid) AS constraint"
        " FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid"
        " LEFT JOIN pg_constraint k ON k.conindid = x.indexrelid AND k.contype IN ('p', 'u')"
        " WHERE x.indrelid = $1::regclass ORDER BY i.relname",
        c.table,
    )
    foreign_keys = _fetch(
        "SELECT conrelid::regclass::text AS owner, conname AS name FROM pg_constraint"
        " WHERE contype = 'f' AND (conrelid = $1::regclass OR confrelid = $1::regclass)",
        c.table,
    )
    swap = [f"ALTER TABLE {c.table} RENAME TO {legacy};"]
    swap += [f"ALTER INDEX {i['name']} RENAME TO {i['name']}_legacy;" for i in indexes]
    swap += [f"ALTER TABLE {k['owner']} DROP CONSTRAINT {k['name']};" for k in foreign_keys]
    swap += [
        f"CREATE TABLE {c.table} (LIKE {legacy} INCLUDING DEFAULTS INCLUDING CONSTRAINTS"
        f" INCLUDING STORAGE{' INCLUDING IDENTITY' if c.identity else ''})"
        f" PARTITION BY RANGE ({c.key});",
        f"ALTER TABLE {c.table} DROP CONSTRAINT {cutover};",
        f"ALTER TABLE {c.table} ATTACH PARTITION {legacy}"
        f" FOR VALUES FROM (MINVALUE) TO ('{boundary}');",
    ]
    for index in indexes:
        name = index["name"]
        if name in c.legacy_only:
            continue
        if index["is_primary"]:
            swap.append(f"ALTER TABLE ONLY {c.table} ADD CONSTRAINT {name} {index['constraint']};")
        else:
            definition = index["definition"].replace(
                f" ON public.{c.table} ", f" ON ONLY public.{c.table} ", 1
            )
            swap.append(definition + ";")
        swap.append(f"ALTER INDEX {name} ATTACH PARTITION {index['name']}_legacy;")
    for days in range(first, first + DAYS_MADE):
        (lower, name), (upper, _) = _day(c.prefix, days), _day(c.prefix, days + 1)
        storage = f" WITH ({c.storage})" if c.storage else ""
        swap.append(
            f"CREATE TABLE {c.table}_{name} PARTITION OF {c.table}"
            f" FOR VALUES FROM ('{lower}') TO ('{upper}'){storage};"
        )
    if c.identity:
        swap.append(
            f"SELECT setval(pg_get_serial_sequence('{c.table}', 'id'),"
            f" nextval(pg_get_serial_sequence('{legacy}', 'id')));"
        )
    if c.table == "deliveries":
        # Deliveries from here on are their event's siblings (app/core/ids.py): found from the
        # event by primary key. Those below may not be, and are found by the old partition's
        # (event_id, endpoint_id) index (deliveries.of_event).
        swap.append(
            "CREATE OR REPLACE FUNCTION deliveries_siblings_from() RETURNS text"
            f" LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT text '{boundary}' $$;"
        )
    _atomically(swap)


def upgrade() -> None:
    with op.get_context().autocommit_block():
        first = _boundary_day()
        for conversion in CONVERSIONS:
            if not _is_partitioned(conversion.table):
                _convert(conversion, first)


def downgrade() -> None:
    raise NotImplementedError(
        "partitioned tables are not turned back into plain ones: restore a backup instead"
    )
