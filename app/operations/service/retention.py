"""Retention: drop the days past it that nothing still needs, then purge the rest in batches,
each its own short transaction, until a batch comes back short.

Runs at the end of every reconcile run and as `herald purge`.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import structlog
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.core.config import Settings
from app.operations.repository import retention
from app.operations.service import partitions

log = structlog.get_logger("herald.retention")

BATCH = 500


async def purge(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession], *, max_batches: int = 200
) -> dict[str, int]:
    before = datetime.now(UTC) - timedelta(days=settings.retention_days)
    engine: AsyncEngine = sessionmaker.kw["bind"]
    counts = {
        # Whole days first: what goes with them, batches need not delete row by row.
        "dropped_days": await _dropping(
            functools.partial(partitions.retire_days, before=before), engine
        ),
        # Then each day's payloads past the days their tenants keep them.
        "dropped_payload_classes": await _dropping(partitions.expire_payloads, engine),
        "purged_deliveries": 0,
        "purged_events": 0,
        "purged_keys": 0,
        "purged_runs": 0,
        "purged_portal_sessions": 0,
        "purged_audit_records": 0,
        "purged_transformations": 0,
    }

    async def drain(name: str, batch: Callable[[AsyncSession], Awaitable[int]]) -> None:
        for _ in range(max_batches):
            async with sessionmaker() as session, session.begin():
                purged = await batch(session)
            counts[name] += purged
            if purged < BATCH:
                return

    async def deliveries(session: AsyncSession) -> int:
        purged, events = await retention.purge_deliveries(
            session, region=settings.region, before=before, limit=BATCH
        )
        counts["purged_events"] += events
        return purged

    await drain("purged_deliveries", deliveries)
    await drain(
        "purged_events",
        lambda session: retention.purge_orphan_events(session, before=before, limit=BATCH),
    )
    await drain("purged_keys", lambda session: retention.purge_expired_keys(session, limit=BATCH))
    await drain(
        "purged_runs", lambda session: retention.purge_runs(session, before=before, limit=BATCH)
    )
    await drain(
        "purged_portal_sessions",
        lambda session: retention.purge_portal_sessions(session, limit=BATCH),
    )
    # The audit trail has a retention of its own, however long deliveries are kept.
    audited = datetime.now(UTC) - timedelta(days=settings.audit_retention_days)
    await drain(
        "purged_audit_records",
        lambda session: retention.purge_audit_records(session, before=audited, limit=BATCH),
    )
    await drain(
        "purged_transformations",
        lambda session: retention.purge_unused_transformations(session, limit=BATCH),
    )
    log.info("retention.purged", **counts)
    return counts


async def _dropping(
    retirement: Callable[[AsyncEngine], Awaitable[int]], engine: AsyncEngine
) -> int:
    """Tables dropped whole; a failure there (a lock not had, a statement cut short) is
    logged and leaves the batches to run: the next run mends and asks again."""
    try:
        return await retirement(engine)
    except Exception as exc:
        log.warning("retention.retirement_failed", error=type(exc).__name__)
        return 0
