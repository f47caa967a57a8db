"""``herald streams halted | skip | redrive``: an operator's hand on ordered streams, on the
database of ``HERALD_DATABASE_URL``. What a skip or a redrive makes due is written with its
outbox wake-up, so the workers' relay wakes its destination (within ``RELAY_INTERVAL_SECONDS``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.cli.keys import in_session
from app.core.scope import Scope


def add_parser(commands: Any) -> None:
    streams = commands.add_parser(
        "streams", help="ordered streams: list the halted ones, skip or redrive a dead head"
    ).add_subparsers(dest="streams_command", required=True)
    halted = streams.add_parser("halted", help="streams halted behind a dead head")
    halted.add_argument("--endpoint", help="only this endpoint's (ep_...)")
    skip = streams.add_parser("skip", help="move a halted stream past its dead head")
    skip.add_argument("delivery_id", help="the dead head (dlv_...)")
    redrive = streams.add_parser("redrive", help="retry a halted stream's dead head in place")
    redrive.add_argument("delivery_id", help="the dead head (dlv_...)")


def run(database_url: str, region: str, args: argparse.Namespace) -> int:
    from app.core.errors import HeraldError

    try:
        if args.streams_command == "halted":
            return _in_session_sync(database_url, lambda s: _halted(s, args.endpoint))
        action = _skip if args.streams_command == "skip" else _redrive
        return _in_session_sync(database_url, lambda s: action(s, args.delivery_id, region))
    except HeraldError as exc:
        print(f"herald streams {args.streams_command}: {exc.detail}", file=sys.stderr)
        return 1


def _in_session_sync(database_url: str, work: Any) -> int:
    import asyncio

    result: int = asyncio.run(in_session(database_url, work))
    return result


async def _halted(session: AsyncSession, endpoint_id: str | None) -> int:
    from app.streams.service import streams

    found = await streams.halted(session, endpoint_id=endpoint_id)
    if not found:
        print("no halted streams")
    for s in found:
        key = s.stream or "(the endpoint's stream)"
        print(
            f"{s.endpoint_id}  {key}  halted since {s.halted_at.isoformat()}  "
            f"behind {s.head_id} (#{s.head_seq}), {s.waiting} waiting"
        )
    return 0


async def _owner(session: AsyncSession, delivery_id: str) -> str:
    from app.core.errors import NotFound
    from app.delivery.service import listings

    owner = await listings.owner_of_delivery(session, delivery_id)
    if owner is None:
        raise NotFound(f"delivery {delivery_id} not found")
    return owner


async def _skip(session: AsyncSession, delivery_id: str, region: str) -> int:
    from app.delivery.service import skip

    await skip.skip_halted_head(
        session, await _owner(session, delivery_id), delivery_id, region=region
    )
    print(f"{delivery_id} skipped: its stream goes on without it")
    return 0


async def _redrive(session: AsyncSession, delivery_id: str, region: str) -> int:
    from app.delivery.service import redrive

    revived, _ = await redrive.redrive_one(
        session, Scope(await _owner(session, delivery_id)), delivery_id, region=region
    )
    print(f"{delivery_id} redriven: #{revived.stream_seq} in its stream, due now")
    return 0
