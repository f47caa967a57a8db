"""``herald keys create | list | revoke``: API keys from the command line, on the database of
``HERALD_DATABASE_URL`` (``herald-dev keys ...`` for the dev stack's)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

if TYPE_CHECKING:
    from app.models import ApiKey

T = TypeVar("T")


def add_parser(commands: Any) -> None:
    keys = commands.add_parser("keys", help="manage API keys").add_subparsers(
        dest="keys_command", required=True
    )
    create = keys.add_parser("create", help="create an API key and print it once")
    create.add_argument("--tenant", help="tenant name (created if it does not exist)")
    create.add_argument("--admin", action="store_true", help="an admin key")
    create.add_argument("--label", help="what the key is for, shown when keys are listed")
    listing = keys.add_parser("list", help="list keys: prefix, label, created, last used")
    listing.add_argument("--tenant", help="only this tenant's keys (by name)")
    revoke = keys.add_parser("revoke", help="revoke a key by its id (key_...)")
    revoke.add_argument("key_id")


async def in_session(database_url: str, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
    from app.core.db import create_engine, create_sessionmaker

    engine = create_engine(database_url, pool_size=1)
    try:
        async with create_sessionmaker(engine)() as session, session.begin():
            return await work(session)
    finally:
        await engine.dispose()


def run(database_url: str, args: argparse.Namespace) -> int:
    from app.core.actors import CLI
    from app.core.errors import NotFound
    from app.tenants.service.api_keys import (
        Principal,
        PrincipalCache,
        issue_key,
        issue_key_for_tenant_name,
        keys_of,
        revoke_key,
    )

    if args.keys_command == "create":
        if args.tenant is None and not args.admin:
            print("herald keys create: give --tenant NAME, --admin, or both", file=sys.stderr)
            return 2

        async def create(session: AsyncSession) -> str:
            if args.tenant is None:
                issued = await issue_key(
                    session, tenant_id=None, is_admin=True, label=args.label, by=CLI
                )
            else:
                issued = await issue_key_for_tenant_name(
                    session, args.tenant, is_admin=args.admin, label=args.label, by=CLI
                )
            return issued.key

        print(asyncio.run(in_session(database_url, create)))
        print("Store this key now: Herald keeps only its hash.", file=sys.stderr)
        return 0

    if args.keys_command == "list":

        async def listed(session: AsyncSession) -> list[str]:
            return [_line(row) for row in await keys_of(session, tenant_name=args.tenant)]

        lines = asyncio.run(in_session(database_url, listed))
        print("id\ttenant\tprefix\tlabel\tcreated\tlast used\trevoked")
        for line in lines:
            print(line)
        return 0

    async def revoked(session: AsyncSession) -> None:
        # As an admin would over HTTP; this process caches no key, so it has none to forget.
        admin = Principal(tenant_id=None, is_admin=True)
        await revoke_key(session, admin, args.key_id, PrincipalCache(0), by=CLI)

    try:
        asyncio.run(in_session(database_url, revoked))
    except NotFound:
        print(f"herald keys revoke: no API key {args.key_id}", file=sys.stderr)
        return 1
    print(f"revoked {args.key_id}; API processes stop accepting it within their key cache time")
    return 0


def _line(key: ApiKey) -> str:
    def when(at: datetime | None) -> str:
        return "-" if at is None else at.isoformat(timespec="seconds")

    shown = (
        key.id,
        key.tenant_id or "admin",
        f"{key.display_prefix}...",
        key.label or "-",
        when(key.created_at),
        when(key.last_used_at),
        when(key.revoked_at),
    )
    return "\t".join(shown)
