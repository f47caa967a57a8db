"""The day partitions of the tables that grow with traffic: which exist, and making the next.

Each is range-partitioned by a time-ordered id (docs/design.md, "Partitions"): a day's
partition holds the ids minted that UTC day, so its bounds are two ``id_floor``s. Deliveries
and events are keyed by their own id; attempts and custody records by their delivery's, so
that a day's deliveries and everything written about them go in partitions of the same day.
An event's deliveries carry its millisecond (``ids.sibling_id``): they are in its day too.

A partition is made as its own table and then attached, never with ``CREATE TABLE ...
PARTITION OF``: the attach takes SHARE UPDATE EXCLUSIVE on the parent, which reads and writes
go on beside, where PARTITION OF takes ACCESS EXCLUSIVE and queues behind every statement.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import cast

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.ids import id_floor


@dataclass(frozen=True)
class Partitioned:
    table: str
    prefix: str  # the prefix of the ids its key holds
    storage: str = ""  # each partition's own storage parameters (the parent takes none)


TABLES = (
    Partitioned("events", "evt"),
    # Room on each page for a batch's claims to be HOT updates (docs/decisions.md).
    Partitioned("deliveries", "dlv", "fillfactor = 50, autovacuum_vacuum_scale_factor = 0.02"),
    Partitioned("attempts", "dlv"),
    Partitioned("custody_records", "dlv"),
)

# One maker at a time across every process: two would both create a day's table, and the
# second attach would fail.
_MAKERS_LOCK = 0x6865_7261_6C64  # "herald"


@dataclass(frozen=True)
class Partition:
    parent: str
    name: str
    bounds: str  # as PostgreSQL prints them: FOR VALUES FROM (...) TO (...)
    lower: str | None  # the lower bound's value (None: MINVALUE)
    upper: str | None  # the upper bound's value (None: MAXVALUE)
    rows: int  # the planner's estimate: exact counts would read every row
    bytes: int  # heap, indexes and TOAST


def day_of(moment: datetime) -> date:
    return moment.astimezone(UTC).date()


def bounds(prefix: str, day: date) -> tuple[str, str]:
    start = datetime.combine(day, time(), UTC)
    return id_floor(prefix, start), id_floor(prefix, start + timedelta(days=1))


def name_of(table: str, day: date) -> str:
    return f"{table}_{day:%Y%m%d}"


_LIST = text(
    """
    SELECT parent.relname AS parent, child.relname AS name,
           pg_get_expr(child.relpartbound, child.oid) AS bounds,
           greatest(child.reltuples, 0)::bigint AS rows,
           pg_total_relation_size(child.oid) AS bytes
      FROM pg_inherits
      JOIN pg_class AS parent ON parent.oid = pg_inherits.inhparent
      JOIN pg_class AS child ON child.oid = pg_inherits.inhrelid
     WHERE parent.relname = ANY(:tables) AND parent.relkind = 'p'
       AND parent.relnamespace = 'public'::regnamespace
     ORDER BY parent.relname, pg_get_expr(child.relpartbound, child.oid)
    """
)


async def existing(connection: AsyncConnection) -> list[Partition]:
    """Every partition of the partitioned tables, each parent's in key order."""
    rows = await connection.execute(_LIST, {"tables": [t.table for t in TABLES]})
    return [Partition(r.parent, r.name, r.bounds, *_range(r.bounds), r.rows, r.bytes) for r in rows]


def _range(printed: str) -> tuple[str | None, str | None]:
    """ "FOR VALUES FROM (MINVALUE) TO ('dlv_01M9...')" -> (None, "dlv_01M9...")."""
    lower, _, upper = (
        printed.removeprefix("FOR VALUES FROM (").removesuffix(")").partition(") TO (")
    )
    return _value(lower), _value(upper)


def _value(printed: str) -> str | None:
    return printed.strip("'") if printed.startswith("'") else None


async def make_days(connection: AsyncConnection, days: list[date], *, lock_timeout_ms: int) -> int:
    """Make each table's partition for each of ``days`` that is not yet covered, in the
    caller's transaction; returns how many were made. Days a partition already covers (the
    table from before partitioning covers every day up to its upper bound) are left alone."""
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
            await connection.execute(
                text(
                    f"CREATE TABLE {name} (LIKE {spec.table} INCLUDING DEFAULTS"
                    f" INCLUDING CONSTRAINTS INCLUDING STORAGE){storage}"
                )
            )
            await connection.execute(
                text(
                    f"ALTER TABLE {spec.table} ATTACH PARTITION {name}"
                    f" FOR VALUES FROM ('{lower}') TO ('{upper}')"
                )
            )
            ranges.append((lower, upper))
            made += 1
    return made


def _holds(partition: tuple[str | None, str | None], key: str) -> bool:
    lower, upper = partition
    return (lower is None or lower <= key) and (upper is None or key < upper)


# Why a day of deliveries must stay, asked of its partition alone: a row not finished (the
# live index), a dead head that halts its stream (an operator must redrive or skip it), a row
# finished within retention (redriven long after it was made). The last reads the day's rows:
# no index is written on every record for a question asked only of days past retention (on
# each reconcile run while such a day is held).
_NEEDED = """
SELECT CASE
  WHEN EXISTS (SELECT FROM {table} WHERE completed_at IS NULL) THEN 'a live delivery'
  WHEN EXISTS (SELECT FROM streams WHERE halted_at IS NOT NULL
                  AND head_id >= :lower AND head_id < :upper) THEN 'a halted stream''s head'
  WHEN EXISTS (SELECT FROM {table} WHERE completed_at >= :before) THEN 'a recent finish'
END
"""


async def still_needed(
    connection: AsyncConnection, partition: Partition, before: datetime
) -> str | None:
    """Why this deliveries partition (attached or just detached) must stay; None: it need not."""
    why = await connection.execute(
        text(_NEEDED.format(table=partition.name)),
        {"lower": partition.lower or "", "upper": partition.upper or "\uffff", "before": before},
    )
    return cast("str | None", why.scalar_one())


async def detach(connection: AsyncConnection, partition: Partition) -> None:
    """Detach without blocking reads or writes of the parent (on an autocommit connection:
    DETACH ... CONCURRENTLY runs two transactions of its own). The table keeps its parent and
    bounds in its comment first, so that one left detached, or half-detached, by a process
    that died or a statement cut short is found and attached again (``mend``)."""
    origin = f"{partition.parent} {partition.bounds}".replace("'", "''")  # a literal: no binds
    await connection.execute(text(f"COMMENT ON TABLE {partition.name} IS '{origin}'"))
    await connection.execute(
        text(f"ALTER TABLE {partition.parent} DETACH PARTITION {partition.name} CONCURRENTLY")
    )


_PENDING = text(
    """
    SELECT parent.relname AS parent, child.relname AS name
      FROM pg_inherits
      JOIN pg_class AS parent ON parent.oid = pg_inherits.inhparent
      JOIN pg_class AS child ON child.oid = pg_inherits.inhrelid
     WHERE parent.relname = ANY(:tables) AND pg_inherits.inhdetachpending
    """
)

# Tables detached by ``detach`` and neither attached again nor dropped: their comment names
# the parent and the bounds they had.
_STRAYS = text(
    """
    SELECT relname AS name, obj_description(oid, 'pg_class') AS origin
      FROM pg_class
     WHERE relkind = 'r' AND NOT relispartition AND relnamespace = 'public'::regnamespace
       AND split_part(obj_description(oid, 'pg_class'), ' ', 1) = ANY(:tables)
       AND obj_description(oid, 'pg_class') LIKE '% FOR VALUES %'
    """
)


async def mend(connection: AsyncConnection) -> list[str]:
    """Finish what a retirement cut short: a detach left pending is finished, and every day
    left detached is attached again, to be asked afresh whether it may go (it may hold a row
    revived meanwhile, which must be seen). Returns the tables attached again."""
    tables = {"tables": [t.table for t in TABLES]}
    for row in (await connection.execute(_PENDING, tables)).all():
        await connection.execute(
            text(f"ALTER TABLE {row.parent} DETACH PARTITION {row.name} FINALIZE")
        )
    mended = []
    for row in (await connection.execute(_STRAYS, tables)).all():
        parent, _, bounds = str(row.origin).partition(" ")
        await connection.execute(text(f"ALTER TABLE {parent} ATTACH PARTITION {row.name} {bounds}"))
        mended.append(row.name)
    return mended


# Retirements, one at a time across every process and region sharing the database.
_RETIRING_LOCK = 0x6865_7261_6C65  # "herale"


async def hold_retirement(connection: AsyncConnection) -> bool:
    """Take the retirement lock for this session, unless another holds it."""
    got = await connection.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": _RETIRING_LOCK})
    return bool(got.scalar_one())


async def release_retirement(connection: AsyncConnection) -> None:
    await connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _RETIRING_LOCK})


async def attach_again(connection: AsyncConnection, partition: Partition) -> None:
    await connection.execute(
        text(f"ALTER TABLE {partition.parent} ATTACH PARTITION {partition.name} {partition.bounds}")
    )


async def drop(connection: AsyncConnection, partition: Partition) -> None:
    await connection.execute(text(f"DROP TABLE {partition.name}"))
