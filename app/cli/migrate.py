"""``herald migrate [--check | --wait]``: bring the database of ``HERALD_DATABASE_URL`` to this
release's schema, or only say whether it is there -- what the Kubernetes Deployments'
initContainer waits on, so that the API and workers start after the migration Job."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any


def add_parser(commands: Any) -> None:
    migrate = commands.add_parser("migrate", help="apply database migrations")
    migrate.add_argument(
        "--check",
        action="store_true",
        help="apply nothing: exit 0 if this release may run on the schema (at its latest "
        "migration, or a later release's), 1 if not (not migrated yet, older, unreachable)",
    )
    migrate.add_argument(
        "--wait",
        action="store_true",
        help="as --check, but look again every 2 s until it passes (an initContainer waiting "
        "for the migration Job)",
    )


# `herald migrate --wait` looks again this often: an initContainer's wait for the migration Job.
SCHEMA_LOOK_SECONDS = 2.0
SCHEMA_CONNECT_SECONDS = 10.0


async def _schema_state(database_url: str) -> tuple[bool, str]:
    """Whether this release may run on the database's schema, and why, in words. It may at its
    own head, and at a revision it does not know: a later release's, after a rollback (expand,
    deploy, contract: the older code runs on the expanded schema, docs/operations.md)."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    from app.core.db import DATABASE_TROUBLE, create_engine
    from app.core.migrate import alembic_config

    script = ScriptDirectory.from_config(alembic_config(database_url))
    heads = set(script.get_heads())
    engine = create_engine(database_url, pool_size=1)
    try:
        async with asyncio.timeout(SCHEMA_CONNECT_SECONDS), engine.connect() as connection:
            current = set(
                await connection.run_sync(
                    lambda sync: MigrationContext.configure(sync).get_current_heads()
                )
            )
    except DATABASE_TROUBLE as exc:  # OSError among them, and so the time-out above
        cause = getattr(exc, "orig", None) or exc
        said = str(cause).splitlines()[0] if str(cause) else "no answer"
        return False, f"the database cannot be reached ({type(cause).__name__}: {said})"
    finally:
        await engine.dispose()
    wanted, found = ", ".join(sorted(heads)), ", ".join(sorted(current))
    if current == heads:
        return True, f"database is at the latest migration ({wanted})"
    if not current:
        return False, "no migration has been applied yet: run `herald migrate` (the migration Job)"
    known = {revision.revision for revision in script.walk_revisions()}
    if not current <= known:
        return True, (
            f"database is at {found}, which this release (at {wanted}) does not know: a later "
            "release's, whose expanded schema this one runs on (a rollback)"
        )
    return False, f"database is at {found}; this release needs {wanted}: run `herald migrate`"


def _check_schema(database_url: str, *, wait: bool) -> int:
    said = ""
    while True:
        ready, state = asyncio.run(_schema_state(database_url))
        if state != said:  # once per change, not once per look
            print(state, file=sys.stdout if ready else sys.stderr, flush=True)
            said = state
        if ready or not wait:
            return 0 if ready else 1
        time.sleep(SCHEMA_LOOK_SECONDS)


def run(database_url: str, ahead_days: int, retention_days: float, args: argparse.Namespace) -> int:
    if args.check or args.wait:
        return _check_schema(database_url, wait=args.wait)
    from app.core.migrate import upgrade_to_head

    upgrade_to_head(database_url)
    print("database is at the latest migration")
    made = asyncio.run(_make_partitions(database_url, ahead_days, retention_days))
    print(f"partitions made through {ahead_days} days ahead ({made} new)")
    return 0


async def _make_partitions(database_url: str, ahead_days: int, retention_days: float) -> int:
    from app.core.db import create_engine
    from app.operations.service.partitions import make_ahead

    engine = create_engine(database_url, pool_size=1)
    try:
        return await make_ahead(engine, ahead_days, retention_days)
    finally:
        await engine.dispose()
