"""Retiring partitions: whether a day, or a day's class of payloads, is still needed; the
detach beside reads and writes, the drop, and the mending of what a retirement cut short left.
One retirement at a time, under its own lock."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.operations.repository.partitions import TABLES, Partition, existing

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


# Why a payload class of a day must stay though its payloads are past their days: a live
# delivery of the day in that class still has to send one (a redrive needs its event found in
# the same statement, so none is revived once the class is detached).
_CLASS_NEEDED = """
SELECT CASE
  WHEN EXISTS (SELECT FROM {deliveries} WHERE completed_at IS NULL
                  AND payload_days >= :lower AND payload_days < :upper) THEN 'a live delivery'
END
"""


async def class_still_needed(
    connection: AsyncConnection, payload_class: Partition, deliveries: Partition
) -> str | None:
    """Why this payload class (attached or just detached) must stay; None: it need not.
    ``deliveries`` is the deliveries partition of its day."""
    why = await connection.execute(
        text(_CLASS_NEEDED.format(deliveries=deliveries.name)),
        {"lower": int(payload_class.lower or -32768), "upper": int(payload_class.upper or 32768)},
    )
    return cast("str | None", why.scalar_one())


async def empty(connection: AsyncConnection, partition: Partition) -> bool:
    # A name from the catalogue (``existing``), never from input.
    found = await connection.execute(text(f"SELECT NOT EXISTS (SELECT FROM {partition.name})"))  # noqa: S608
    return bool(found.scalar_one())


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
     WHERE parent.relname = ANY(:parents) AND pg_inherits.inhdetachpending
    """
)

# Tables detached by ``detach`` and neither attached again nor dropped: their comment names
# the parent and the bounds they had.
_STRAYS = text(
    """
    SELECT relname AS name, obj_description(oid, 'pg_class') AS origin
      FROM pg_class
     WHERE relkind IN ('r', 'p') AND NOT relispartition AND relnamespace = 'public'::regnamespace
       AND split_part(obj_description(oid, 'pg_class'), ' ', 1) = ANY(:parents)
       AND obj_description(oid, 'pg_class') LIKE '% FOR VALUES %'
    """
)


async def mend(connection: AsyncConnection) -> list[str]:
    """Finish what a retirement cut short: a detach left pending is finished, and every day
    left detached is attached again, to be asked afresh whether it may go (it may hold a row
    revived meanwhile, which must be seen). Returns the tables attached again."""
    split = [p.name for p in await existing(connection) if p.split]
    parents = {"parents": [t.table for t in TABLES] + split}
    for row in (await connection.execute(_PENDING, parents)).all():
        await connection.execute(
            text(f"ALTER TABLE {row.parent} DETACH PARTITION {row.name} FINALIZE")
        )
    mended = []
    for row in (await connection.execute(_STRAYS, parents)).all():
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
