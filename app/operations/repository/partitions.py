"""The day partitions of the tables that grow with traffic: which exist, and making the next.

Each is range-partitioned by a time-ordered id (docs/design.md, "Partitions"): a day's
partition holds the ids minted that UTC day, so its bounds are two ``id_floor``s. Deliveries
and events are keyed by their own id; attempts and custody records by their delivery's, so
that a day's deliveries and everything written about them go in partitions of the same day.
An event's deliveries carry its millisecond (``ids.sibling_id``): they are in its day too.

A day of events is partitioned again by ``payload_days`` when some tenant keeps its payloads
for less than the operator's retention (``payload_classes``): a class of payloads past their
days goes as a table, however long the day's records are kept. Without such a tenant a day
of events is one table, as every other day partition.

A partition is made as its own table and then attached, never with ``CREATE TABLE ...
PARTITION OF``: the attach takes SHARE UPDATE EXCLUSIVE on the parent, which reads and writes
go on beside, where PARTITION OF takes ACCESS EXCLUSIVE and queues behind every statement.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.ids import id_floor


@dataclass(frozen=True)
class Partitioned:
    table: str
    prefix: str  # the prefix of the ids its key holds
    storage: str = ""  # each partition's own storage parameters (the parent takes none)
    by_payload_days: bool = False  # each day partitioned again by payload class


TABLES = (
    Partitioned("events", "evt", by_payload_days=True),
    # Room on each page for a batch's claims to be HOT updates (docs/decisions.md).
    Partitioned("deliveries", "dlv", "fillfactor = 50, autovacuum_vacuum_scale_factor = 0.02"),
    Partitioned("attempts", "dlv"),
    Partitioned("custody_records", "dlv"),
)

# One maker at a time across every process: two would both create a day's table, and the
# second attach would fail.
_MAKERS_LOCK = 0x6865_7261_6C64  # "herald"


# The steps a day of events is split at, as the days a payload is kept: a class for each step
# some tenant's payloads fall under (shorter than the operator's retention), holding those
# kept more than the step before it and at most this one; the last class holds every longer
# one, and goes with its day. Only steps in use: every class is a table in each day, and the
# hot paths' plans lock every table they may touch.
PAYLOAD_STEPS = (1, 3, 7, 14, 30, 90, 180, 365)


def payload_classes(retention_days: float, kept: Iterable[int]) -> list[int]:
    """The least payload_days of each class of a day of events made now, given the days the
    tenants' payloads are ``kept`` (payload_days_of): [1] alone is one class, a plain table."""
    least = {1}
    for days in kept:
        step = next((step for step in PAYLOAD_STEPS if step >= days), None)
        if step is not None and step < retention_days:
            least.add(step + 1)
    return sorted(least)


# The days each tenant with a retention of its own keeps its payloads, as its accepts decide.
_TENANTS_PAYLOAD_DAYS = text(
    """
    SELECT DISTINCT payload_days_of(id) FROM tenants
     WHERE payload_retention_days IS NOT NULL OR retention_days IS NOT NULL
    """
)


async def payloads_kept(connection: AsyncConnection) -> list[int]:
    """The days tenants keep their payloads, each once (those that keep them as long as the
    records not among them)."""
    return [int(days) for days in (await connection.execute(_TENANTS_PAYLOAD_DAYS)).scalars()]


@dataclass(frozen=True)
class Partition:
    parent: str  # a table of TABLES, or a day of events for a payload class
    name: str
    bounds: str  # as PostgreSQL prints them: FOR VALUES FROM (...) TO (...)
    lower: str | None  # the lower bound's value (None: MINVALUE)
    upper: str | None  # the upper bound's value (None: MAXVALUE)
    rows: int  # the planner's estimate: exact counts would read every row
    bytes: int  # heap, indexes and TOAST (0 for a day partitioned again: see its classes)
    split: bool = False  # partitioned again (a day of events, by payload class)


def day_of(moment: datetime) -> date:
    return moment.astimezone(UTC).date()


def bounds(prefix: str, day: date) -> tuple[str, str]:
    start = datetime.combine(day, time(), UTC)
    return id_floor(prefix, start), id_floor(prefix, start + timedelta(days=1))


def name_of(table: str, day: date) -> str:
    return f"{table}_{day:%Y%m%d}"


# The partitions of TABLES, and those of their partitions partitioned again.
_LIST = text(
    """
    SELECT parent.relname AS parent, child.relname AS name,
           pg_get_expr(child.relpartbound, child.oid) AS bounds,
           greatest(child.reltuples, 0)::bigint AS rows,
           pg_total_relation_size(child.oid) AS bytes, child.relkind = 'p' AS split
      FROM pg_inherits
      JOIN pg_class AS parent ON parent.oid = pg_inherits.inhparent
      JOIN pg_class AS child ON child.oid = pg_inherits.inhrelid
     WHERE parent.relkind = 'p' AND parent.relnamespace = 'public'::regnamespace
       AND (parent.relname = ANY(:tables)
            OR EXISTS (SELECT FROM pg_inherits AS up JOIN pg_class AS top ON top.oid = up.inhparent
                        WHERE up.inhrelid = parent.oid AND top.relname = ANY(:tables)))
     ORDER BY parent.relname, pg_get_expr(child.relpartbound, child.oid)
    """
)


async def existing(connection: AsyncConnection) -> list[Partition]:
    """Every partition of the partitioned tables, each parent's in key order, and the
    payload classes of each day of events after its day's."""
    rows = await connection.execute(_LIST, {"tables": [t.table for t in TABLES]})
    return [
        Partition(r.parent, r.name, r.bounds, *_range(r.bounds), r.rows, r.bytes, r.split)
        for r in rows
    ]


def classes_of(day: Partition, found: list[Partition]) -> list[int]:
    """The payload classes a day of events was made with ([1]: one table)."""
    if not day.split:
        return [1]
    return sorted(int(p.lower or 1) for p in found if p.parent == day.name)


def _range(printed: str) -> tuple[str | None, str | None]:
    """ "FOR VALUES FROM (MINVALUE) TO ('dlv_01M9...')" -> (None, "dlv_01M9...")."""
    lower, _, upper = (
        printed.removeprefix("FOR VALUES FROM (").removesuffix(")").partition(") TO (")
    )
    return _value(lower), _value(upper)


def _value(printed: str) -> str | None:
    return printed.strip("'") if printed.startswith("'") else None


async def make_days(
    connection: AsyncConnection, days: list[date], *, classes: list[int], lock_timeout_ms: int
) -> int:
    """Make each table's partition for each of ``days`` that is not yet covered, in the
    caller's transaction -- a day of events with a partition for each payload class of
    ``classes`` when there are more than one (``payload_classes``); returns how many were
    made. Days a partition already covers (the table from before partitioning covers every
    day up to its upper bound) are left alone."""
    await connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MAKERS_LOCK})
    await connection.execute(text(f"SET LOCAL lock_timeout = '{int(lock_timeout_ms)}ms'"))
    covered: dict[str, list[tuple[str | None, str | None]]] = {}
    for partition in await existing(connection):
        covered.setdefault(partition.parent, []).append((partition.lower, partition.upper))
    made = 0
    for spec in TABLES:
        ranges = covered.get(spec.table)
        if ranges is None:
            continue  # not partitioned (a schema from before its migration)
        for day in days:
            lower, upper = bounds(spec.prefix, day)
            if any(_holds(r, lower) for r in ranges):
                continue  # the day is in a partition already
            name = name_of(spec.table, day)
            storage = f" WITH ({spec.storage})" if spec.storage else ""
            split_by_class = spec.by_payload_days and len(classes) > 1
            split = " PARTITION BY RANGE (payload_days)" if split_by_class else storage
            await connection.execute(
                text(
                    f"CREATE TABLE {name} (LIKE {spec.table} INCLUDING DEFAULTS"
                    f" INCLUDING CONSTRAINTS INCLUDING STORAGE){split}"
                )
            )
            if split_by_class:
                await _make_classes(connection, name, classes)
            await connection.execute(
                text(
                    f"ALTER TABLE {spec.table} ATTACH PARTITION {name}"
                    f" FOR VALUES FROM ('{lower}') TO ('{upper}')"
                )
            )
            ranges.append((lower, upper))
            made += 1
    return made


async def _make_classes(connection: AsyncConnection, day: str, classes: list[int]) -> None:
    """A day's payload classes, made before the day is attached: no lock on events yet."""
    for n, least in enumerate(classes):
        lower = "MINVALUE" if n == 0 else str(least)
        upper = str(classes[n + 1]) if n + 1 < len(classes) else "MAXVALUE"
        await connection.execute(
            text(
                f"CREATE TABLE {day}_p{least} PARTITION OF {day}"
                f" FOR VALUES FROM ({lower}) TO ({upper})"
            )
        )


def _holds(partition: tuple[str | None, str | None], key: str) -> bool:
    lower, upper = partition
    return (lower is None or lower <= key) and (upper is None or key < upper)
