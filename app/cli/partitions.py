"""``herald partitions``: the day partitions of the tables that grow with traffic, with their
sizes, on the database of ``HERALD_DATABASE_URL``; ``--make`` makes the days ahead now (as
every reconcile run does)."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any


def add_parser(commands: Any) -> None:
    partitions = commands.add_parser(
        "partitions", help="list the day partitions and their sizes; --make the days ahead now"
    )
    partitions.add_argument(
        "--make", action="store_true", help="first make any of the days ahead that is missing"
    )


def run(database_url: str, ahead_days: int, retention_days: float, args: argparse.Namespace) -> int:
    for line in asyncio.run(_report(database_url, ahead_days, retention_days, make=args.make)):
        print(line)
    return 0


async def _report(
    database_url: str, ahead_days: int, retention_days: float, *, make: bool
) -> list[str]:
    from app.core.db import create_engine
    from app.operations.service import partitions

    engine = create_engine(database_url, pool_size=1)
    try:
        made = await partitions.make_ahead(engine, ahead_days, retention_days) if make else None
        found = await partitions.listing(engine)
    finally:
        await engine.dispose()
    lines = [f"{'partition':<28} {'from':<10}  {'until':<10}  {'rows (est.)':>12}  {'size':>10}"]
    classes = [p for p in found if p.parent.startswith("events_")]
    for p in found:
        if p in classes:
            continue  # under its day, below
        lines.append(_line(p.name, _day(p.lower), _day(p.upper), p.rows, p.bytes))
        # A day of events split by payload class: its size is its classes'.
        for c in (c for c in classes if c.parent == p.name):
            lines.append(_line(f"  {c.name}", "payload", _longest(c.upper), c.rows, c.bytes))
    if not found:
        lines.append("no partitioned tables: run `herald migrate`")
    if made is not None:
        lines.append(f"made {made} partition{'' if made == 1 else 's'} ahead")
    return lines


def _day(bound: str | None) -> str:
    from app.core.ids import moment_of

    return "(start)" if bound is None else moment_of(bound).date().isoformat()


def _line(name: str, start: str, end: str, rows: int, size: int) -> str:
    return f"{name:<28} {start:<10}  {end:<10}  {rows:>12,}  {_size(size):>10}"


def _longest(upper: str | None) -> str:
    """How long a day's class of payloads keeps them: "<= 3 d", or "longer" for its last."""
    return "longer" if upper is None else f"<= {int(upper) - 1} d"


def _size(count: int) -> str:
    size, unit = float(count), "B"
    for bigger in ("kB", "MB", "GB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
