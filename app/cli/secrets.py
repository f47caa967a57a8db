"""``herald secrets new-key | rotate``: the key ring every stored secret is sealed under
(HERALD_SECRET_KEYS, app/core/sealing.py).

Rotating a key: put a new entry first in HERALD_SECRET_KEYS (keep the old one after it), roll
the API and workers -- they seal with the new key and open with either -- then run ``herald
secrets rotate``, which re-seals everything sealed under another key, a page per transaction,
while Herald runs. Once it reports nothing left, the old entry may be removed."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from app.core.config import Settings

if TYPE_CHECKING:
    from app.endpoints.service.credentials import Resealed

PAGE = 500


def add_parser(commands: Any) -> None:
    secrets = commands.add_parser(
        "secrets", help="the key ring stored secrets are sealed under: new key, rotate"
    ).add_subparsers(dest="secrets_command", required=True)
    new_key = secrets.add_parser("new-key", help="print a new HERALD_SECRET_KEYS entry")
    new_key.add_argument(
        "--id", dest="key_id", help="the key's id (default: key-<today's date>)", default=None
    )
    rotate = secrets.add_parser(
        "rotate", help="re-seal every stored secret under the first key of HERALD_SECRET_KEYS"
    )
    rotate.add_argument("--page", type=int, default=PAGE, help=f"rows a transaction ({PAGE})")


def run(settings: Settings, database_url: str | None, args: argparse.Namespace) -> int:
    from app.core.sealing import KeyRingError, new_key

    try:
        if args.secrets_command == "new-key":
            print(new_key(args.key_id or f"key-{datetime.now(UTC):%Y%m%d}"))
            return 0
        if database_url is None:
            print("herald secrets rotate: HERALD_DATABASE_URL must be set", file=sys.stderr)
            return 2
        done = asyncio.run(_rotate(settings, database_url, max(1, args.page)))
    except KeyRingError as exc:
        print(f"herald secrets: {exc}", file=sys.stderr)
        return 2
    sealing = settings.key_ring().sealing_id
    if done.unopened:
        for endpoint_id, column in done.unopened:
            print(f"not re-sealed: {endpoint_id} {column} (it does not open)", file=sys.stderr)
        print(
            f"re-sealed {done.count} secrets under {sealing!r}; {len(done.unopened)} do not "
            "open under HERALD_SECRET_KEYS (a lost key: rotate those endpoints' secrets, "
            "docs/operations.md) -- keep the other keys until they are replaced",
            file=sys.stderr,
        )
        return 1
    print(
        f"re-sealed {done.count} secrets under {sealing!r}; every stored secret is sealed "
        "under it now, so the other keys may leave HERALD_SECRET_KEYS"
    )
    return 0


async def _rotate(settings: Settings, database_url: str, page: int) -> Resealed:
    from app.console.service import sign_in_forms
    from app.core.db import create_engine, create_sessionmaker
    from app.endpoints.service import credentials

    ring = settings.key_ring()
    engine = create_engine(database_url, pool_size=1)
    sessionmaker = create_sessionmaker(engine)
    done = credentials.Resealed()
    try:
        after: str | None = ""
        while after is not None:
            async with sessionmaker() as session, session.begin():
                after = await credentials.reseal_page(
                    session, ring, after_id=after, limit=page, into=done
                )
        async with sessionmaker() as session, session.begin():
            count, unopened = await sign_in_forms.reseal(session, ring)
        done.count += count
        done.unopened += [("console", purpose) for purpose in unopened]
    finally:
        await engine.dispose()
    return done
