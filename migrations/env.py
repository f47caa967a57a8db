"""Alembic environment: async engine, Herald's metadata, URL from Herald's settings."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import structlog
from alembic import context
from alembic.runtime.migration import MigrationInfo
from sqlalchemy.engine import Connection

import app.models  # noqa: F401  (registers every table on Base.metadata)
from app.core.config import load_settings
from app.core.db import Base, create_engine

config = context.config
target_metadata = Base.metadata

log = structlog.get_logger("herald.migrate")

# Alembic's INFO lines are its set-up -- each plugin it loads, the dialect, transactional DDL:
# nine lines before anything happens. What a run changed is logged below instead, once per
# migration, in Herald's own format; Alembic's warnings still show.
logging.getLogger("alembic").setLevel(logging.WARNING)


def _log_step(*, step: MigrationInfo, **_: Any) -> None:
    """One line per migration run (called once its operations ran, before the commit)."""
    if not step.is_migration:
        return  # a stamp: nothing ran
    script = step.up_revision
    log.info(
        "migration.applied" if step.is_upgrade else "migration.reverted",
        revision=step.up_revision_id,
        title=script.doc if script is not None else None,
    )


def _database_url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    settings = load_settings()
    if settings.database_url is None:
        raise SystemExit("HERALD_DATABASE_URL is not set (use `herald dev` for the embedded stack)")
    return settings.async_database_url


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        on_version_apply=_log_step,
        # Each migration commits on its own: a lock one takes (a table renamed, a key swapped)
        # is let go before the next begins, and an upgrade stopped midway resumes from the last
        # migration that committed rather than from the start.
        transaction_per_migration=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_online() -> None:
    engine = create_engine(_database_url(), pool_size=1)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    context.configure(url=_database_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_run_online())
