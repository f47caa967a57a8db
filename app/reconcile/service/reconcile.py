"""The reconciler: brings back everything that fell through, from PostgreSQL alone.

Redis is a pressure buffer that may lose everything; every delivery that is not terminal stays
findable here. A run mends ordered streams left without a live, scheduled head (only a fault
leaves one), arms the wake-up of every destination with live deliveries (Redis may have lost
it) and publishes outbox rows the API and the relays left behind. Each page is its own
short statement or transaction; Redis is written after it, never inside it. Any number of runs,
relays and workers may overlap: arming only ever moves a wake-up earlier, and outbox pages are
taken with SKIP LOCKED.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta

import structlog
from arq.connections import ArqRedis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core import metrics, queue
from app.core.config import Settings
from app.core.db import single_statements
from app.core.logs import log_failure
from app.core.redis_clients import FlowRedis
from app.flow.service.wakeups import Arm, Wakeups
from app.models import ReconcileRun
from app.operations.service import partitions, retention
from app.outbox.service import outbox
from app.outbox.service.outbox import PendingPublication
from app.outbox.service.publishing import publish_and_mark
from app.reconcile.repository import reconcile_runs, reconcile_scans
from app.streams.service import repair

log = structlog.get_logger("herald.reconcile")

# A run that has not finished this long after it started had its worker die under it.
ABANDONED_AFTER = timedelta(hours=1)
# Nothing is republished: destinations are armed again from PostgreSQL. `destinations_armed`
# counts real repairs (an entry created or moved earlier).
CATEGORIES = (
    "streams_checked",
    "streams_mended",
    "destinations_checked",
    "destinations_armed",
    "unpublished_outbox",
)
# Repairs are among the rows checked: the budget counts the rows a run examines, once.
_REPAIRS = ("streams_mended", "destinations_armed")

# A wake-up later than reconcile's by no more than this is the wake-up working, not a repair:
# whoever set it (a retry armed after its record commits, a settle after a claim) read Redis's
# clock a moment after PostgreSQL's, and so set it that moment late. It is moved earlier all
# the same; only the count leaves it out.
ARMED_LATE_SECONDS = 1.0
# A scan takes one page of at most ``limit`` rows: (rows examined, rows repaired).
Scan = Callable[[int], Awaitable[tuple[int, int]]]


@dataclass
class Reconciler:
    settings: Settings
    sessionmaker: async_sessionmaker[AsyncSession]
    redis: FlowRedis
    counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.counts = dict.fromkeys(CATEGORIES, 0)

    @property
    def _budget(self) -> int:
        spent = sum(n for category, n in self.counts.items() if category not in _REPAIRS)
        return self.settings.reconcile_max_rows - spent

    @property
    def _page_size(self) -> int:
        return max(0, min(self.settings.reconcile_page_size, self._budget))

    async def run(self, run_id: str) -> dict[str, int]:
        """Work through every category in pages until nothing is left or the budget is spent."""
        scans: list[tuple[str, Scan]] = [
            # Streams first: a stream mended now has its destination armed by the next scan
            # too, should the arm made here be lost.
            ("streams_mended", self._streams()),
            ("destinations_armed", self._destinations()),
            ("unpublished_outbox", self._unpublished_outbox),
        ]
        for category, scan in scans:
            while (limit := self._page_size) > 0:
                examined, repaired = await scan(limit)
                self.counts[category] += repaired
                await self._record_progress(run_id)
                log.info("reconcile.page", run_id=run_id, category=category, rows=repaired)
                if examined < limit:
                    break
        return self.counts

    async def _publish(self, publications: list[PendingPublication]) -> None:
        if publications:
            await publish_and_mark(
                self.sessionmaker, self.redis, self.settings.region, publications
            )

    def _streams(self) -> Scan:
        """Mend every stream with live deliveries but no live, scheduled head, and arm the
        destinations of the heads that gives. A healthy stream costs one index probe."""
        after = [repair.START]
        wakeups = Wakeups(self.redis, self.settings.region)

        async def scan(limit: int) -> tuple[int, int]:
            async with single_statements(self.sessionmaker) as connection:
                page = await repair.live_streams(
                    connection, region=self.settings.region, after=after[0], limit=limit
                )
            if not page.examined:
                return 0, 0
            after[0] = page.examined[-1]
            self.counts["streams_checked"] += len(page.examined)
            if page.stranded:
                async with self.sessionmaker() as session, session.begin():
                    heads = await repair.mend(session, page.stranded)
                await wakeups.arm(Arm.for_heads(heads))
                log.warning("reconcile.streams_mended", streams=len(page.stranded))
            return len(page.examined), len(page.stranded)

        return scan

    def _destinations(self) -> Scan:
        """Arm every destination with live deliveries for when its first one can be claimed
        (Redis may have lost its entry). Arming only ever moves an entry earlier: a parked
        destination stays parked, a destination already armed is left alone, and no delivery
        row and no outbox row is written -- so runs can repeat without anything growing."""
        after = [""]
        wakeups = Wakeups(self.redis, self.settings.region)

        async def scan(limit: int) -> tuple[int, int]:
            async with single_statements(self.sessionmaker) as connection:
                page = await reconcile_scans.live_destinations(
                    connection, region=self.settings.region, after=after[0], limit=limit
                )
            if not page:
                return 0, 0
            after[0] = page[-1].endpoint_id
            armed = await wakeups.arm(
                [Arm(d.tenant_id, d.endpoint_id, d.wake_in) for d in page],
                slack_seconds=ARMED_LATE_SECONDS,
            )
            self.counts["destinations_checked"] += len(page)
            return len(page), armed

        return scan

    async def _unpublished_outbox(self, limit: int) -> tuple[int, int]:
        async with self.sessionmaker() as session, session.begin():
            publications = await outbox.claim_unpublished(
                session,
                region=self.settings.region,
                limit=limit,
                min_age_seconds=self.settings.reconcile_grace_seconds,
                claim_seconds=self.settings.relay_claim_seconds,
            )
        await self._publish(publications)
        return len(publications), len(publications)

    async def _record_progress(self, run_id: str) -> None:
        async with self.sessionmaker() as session, session.begin():
            await reconcile_runs.update_run(session, run_id, counts=dict(self.counts))


async def run_reconcile(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: FlowRedis,
    run_id: str,
) -> None:
    """The job: mark the run running, reconcile, record the outcome (never raises)."""
    async with sessionmaker() as session, session.begin():
        await reconcile_runs.update_run(session, run_id, status="running")
        # Runs whose worker died never finish by themselves; say so instead of "running".
        await reconcile_runs.fail_abandoned(session, older_than=ABANDONED_AFTER)
    reconciler = Reconciler(settings, sessionmaker, redis)
    try:
        counts = await reconciler.run(run_id)
        # Upkeep rides along, after the work that matters more: the days ahead made, then
        # retention's bounded batches.
        engine = sessionmaker.kw["bind"]
        counts["partitions_made"] = await partitions.make_ahead(
            engine, settings.partitions_ahead_days, settings.retention_days
        )
        # The days ahead made again for the payload classes tenants' settings call for now.
        counts["partitions_remade"] = await partitions.remake_for_classes(
            engine, settings.partitions_ahead_days, settings.retention_days
        )
        counts.update(await retention.purge(settings, sessionmaker))
    except asyncio.CancelledError:
        await asyncio.shield(
            _record_failure(sessionmaker, run_id, reconciler.counts, "interrupted: worker stopped")
        )
        raise
    except Exception as exc:
        error = log_failure(log, "reconcile.failed", exc, run_id=run_id)
        await _record_failure(sessionmaker, run_id, reconciler.counts, error)
        return
    async with sessionmaker() as session, session.begin():
        await reconcile_runs.mark_finished(
            session, run_id, status="succeeded", counts=counts, error=None
        )
    metrics.RECONCILE_RUNS.labels("succeeded").inc()
    for category, count in counts.items():
        metrics.RECONCILE_ROWS.labels(category).inc(count)
    log.info("reconcile.finished", run_id=run_id, **counts)


async def _record_failure(
    sessionmaker: async_sessionmaker[AsyncSession], run_id: str, counts: dict[str, int], error: str
) -> None:
    metrics.RECONCILE_RUNS.labels("failed").inc()
    async with sessionmaker() as session, session.begin():
        await reconcile_runs.mark_finished(
            session, run_id, status="failed", counts=counts, error=error
        )


async def start_reconcile(
    sessionmaker: async_sessionmaker[AsyncSession],
    arq: ArqRedis,
    settings: Settings,
    *,
    trigger: str,
) -> ReconcileRun:
    """A reconcile run of this process's region."""

    async def fail(session: AsyncSession, run: ReconcileRun, error: str) -> None:
        await reconcile_runs.mark_finished(session, run.id, status="failed", counts={}, error=error)

    return await queue.start_tracked(
        sessionmaker,
        what="run",
        insert=lambda session: reconcile_runs.insert_run(
            session, region=settings.region, trigger=trigger
        ),
        enqueue=lambda run: queue.enqueue_reconcile(arq, settings.region, run.id),
        fail=fail,
    )


async def freshness(
    sessionmaker: async_sessionmaker[AsyncSession], settings: Settings
) -> tuple[bool, str]:
    """Whether reconcile ran lately enough (``HERALD_RECONCILE_STALE_SECONDS``), in words: a
    missing cron shows here and in herald_reconcile_last_success_age_seconds."""
    async with sessionmaker() as session:
        age = await reconcile_runs.last_success_age(session, settings.region)
    if age is None:
        return False, "never succeeded: is the cron (herald reconcile) running?"
    said = f"last succeeded {age:.0f} s ago"
    if age > settings.reconcile_stale_seconds:
        return False, f"stale: {said} (is the cron, herald reconcile, running?)"
    return True, said


async def recent_runs(
    session: AsyncSession, *, limit: int, before_id: str | None = None
) -> list[ReconcileRun]:
    """Reconcile runs, newest first (the console's history)."""
    return await reconcile_runs.list_page(session, limit=limit, before_id=before_id)
