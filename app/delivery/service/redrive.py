"""Redrive: dead deliveries get another go, under the same ids, with their history kept --
one at a time, or in bulk by a filter."""

from __future__ import annotations

import asyncio
import functools
from datetime import timedelta
from typing import Any

import structlog
from arq.connections import ArqRedis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core import queue
from app.core.config import Settings
from app.core.errors import Conflict, TooManyRequests
from app.core.logs import log_failure
from app.core.payload_retention import expired
from app.core.redis_clients import FlowRedis
from app.core.scope import Scope
from app.core.states import DeliveryState
from app.delivery.repository import redrive_jobs, revivals
from app.delivery.schemas import RedriveFilter
from app.delivery.service import listings
from app.endpoints.service import endpoints
from app.models import Delivery, RedriveJob
from app.outbox.service import outbox
from app.outbox.service.outbox import PendingPublication
from app.outbox.service.publishing import publish_and_mark
from app.streams.service.heads import lock_streams, requeue, requeuing, streams_of
from app.tenants.service import limits

log = structlog.get_logger("herald.redrive")


async def redrive_one(
    session: AsyncSession,
    scope: Scope,
    delivery_id: str,
    *,
    region: str,
    replay: bool = False,
) -> tuple[Delivery, list[PendingPublication]]:
    """Returns the revived delivery and what this process (of ``region``) may publish after the
    commit: its outbox rows are written in the delivery's own region, whose relays and
    reconcilers alone publish them -- nothing, if that is another region. ``replay``: a
    succeeded delivery is sent again too (under its id), for a receiver that lost it."""
    current = await listings.find_delivery(session, scope, delivery_id)
    if expired(current.payload_expires_at):
        raise _payload_expired(current)
    endpoint = await endpoints.get_live(session, scope, current.endpoint_id)
    if endpoint is None:
        raise Conflict("the delivery's endpoint was deleted")
    if not endpoint.enabled:
        raise Conflict(f"endpoint {endpoint.id} is disabled; enable it first")
    async with requeuing(session, [delivery_id]):
        states = (DeliveryState.DEAD, DeliveryState.SUCCEEDED) if replay else None
        revived = await revivals.redrive(session, scope.tenant_id, delivery_id, states=states)
    if revived is not None and revived.stream is not None:
        await session.refresh(revived)  # its place in its stream, as the requeue left it
    if revived is None:
        if current.payload_expires_at is not None and current.state in _FINISHED:
            # Its payload's class was dropped a moment before its days were out.
            raise _payload_expired(current)
        if current.state == DeliveryState.CANCELLED.value:
            raise Conflict(
                "a cancelled delivery is final and is not redriven: accept the intent again "
                "to send the event"
            )
        if replay:
            raise Conflict(f"only finished deliveries can be replayed; this one is {current.state}")
        raise Conflict(f"only dead deliveries can be redriven; this one is {current.state}")
    # The outbox row commits with the state change, so the redrive survives a crash.
    publications = await outbox.insert_wakeups(session, [revived], revived.region)
    return revived, publications if revived.region == region else []


_FINISHED = (DeliveryState.DEAD.value, DeliveryState.SUCCEEDED.value)


def _payload_expired(delivery: Delivery) -> Conflict:
    when = delivery.payload_expires_at
    assert when is not None
    return Conflict(
        f"the payload of delivery {delivery.id} expired at {when:%Y-%m-%d %H:%M} UTC (its "
        f"tenant keeps payloads {delivery.payload_days} days), so it cannot be sent again: "
        "accept the intent again to send the event"
    )


REDRIVE_BATCH = 500
# What one bulk redrive of the dead may revive: past it the job ends, its `more` saying so, and
# another call goes on (what this one revived is no longer dead, so it is not revived twice).
MAX_PER_JOB = 50_000
# Bulk redrives a tenant may have queued or running at once (they share the control queue with
# reconcile runs); a job older than ACTIVE_FOR no longer counts, so one lost with Redis blocks
# nothing for long. Its customers' portal replays have a share of their own beside it -- one
# each, two together -- so that they never take the tenant's.
MAX_ACTIVE_PER_TENANT = 2
MAX_ACTIVE_PER_CUSTOMER = 1
MAX_ACTIVE_ALL_CUSTOMERS = 2
ACTIVE_FOR = timedelta(minutes=15)


async def _lock_streams_of(session: AsyncSession, delivery_ids: list[str]) -> None:
    """A page's streams, locked before its rows (app/streams/repository/streams.py)."""
    await lock_streams(session, await streams_of(session, delivery_ids))


async def run_bulk_redrive(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: FlowRedis,
    job_id: str,
) -> None:
    """The background job: pages of finished deliveries (dead, or succeeded for a replay), each
    redriven with its outbox rows in one short transaction that also advances the job's cursor
    and count; published after commit. Only what finished before the job was asked for: a
    delivery this job (or an earlier one) revived that dies again meanwhile is not revived
    again by it. At most MAX_PER_JOB."""
    async with sessionmaker() as session, session.begin():
        job = await redrive_jobs.get(session, job_id)
        if job is None:
            return
        await redrive_jobs.update_job(session, job_id, status="running")
    cursor, total = job.cursor, job.redriven
    try:
        wanted = RedriveFilter.model_validate(job.filter)
        # A replay goes to the end: what it replayed succeeds again, so a second job would
        # find it again and never reach the rest. Only a redrive of the dead stops at
        # MAX_PER_JOB: what it revived is no longer dead, and asking again goes on.
        replaying = DeliveryState.SUCCEEDED.value in wanted.states
        while True:
            async with sessionmaker() as session, session.begin():

                async def lock_their_streams(
                    ids: list[str], session: AsyncSession = session
                ) -> None:
                    await lock_streams(session, await streams_of(session, ids))

                revived, cursor = await revivals.redrive_page(
                    session,
                    job.tenant_id,
                    job_id=job_id,
                    region=job.region,
                    after_id=cursor,
                    limit=REDRIVE_BATCH,
                    endpoint_id=wanted.endpoint_id,
                    event_type=wanted.event_type,
                    dead_after=wanted.dead_after,
                    dead_before=min(filter(None, (wanted.dead_before, job.created_at))),
                    states=[DeliveryState(state) for state in wanted.states],
                    before_reviving=functools.partial(_lock_streams_of, session),
                )
                await requeue(session, [d.id for d in revived])
                publications = await outbox.insert_wakeups(session, revived, job.region)
                total += len(revived)
                await redrive_jobs.update_job(session, job_id, cursor=cursor, redriven=total)
            if publications:
                await publish_and_mark(sessionmaker, redis, job.region, publications)
            if cursor is None or (total >= MAX_PER_JOB and not replaying):
                break
    except asyncio.CancelledError:
        await asyncio.shield(_finish(sessionmaker, job_id, "failed", "interrupted: worker stopped"))
        raise
    except Exception as exc:
        error = log_failure(log, "redrive.failed", exc, job_id=job_id)
        await _finish(sessionmaker, job_id, "failed", error)
        return
    await _finish(sessionmaker, job_id, "succeeded", None)


async def _finish(
    sessionmaker: async_sessionmaker[AsyncSession], job_id: str, status: str, error: str | None
) -> None:
    async with sessionmaker() as session, session.begin():
        await redrive_jobs.finish(session, job_id, status=status, error=error)


async def start_bulk_redrive(
    sessionmaker: async_sessionmaker[AsyncSession],
    arq: ArqRedis,
    settings: Settings,
    *,
    tenant_id: str,
    wanted: dict[str, Any],
    customer_id: str | None = None,
) -> RedriveJob:
    """A bulk redrive of the tenant's finished deliveries matching ``wanted``, run in this
    process's region; ``customer_id`` when a customer's portal asks. Asked again by the same
    asker while the same one is queued or running, it is that job (and queued again, which arq
    ignores unless Redis lost it); past the asker's share of others, TooManyRequests."""

    found_running: set[str] = set()  # asked again: its own run may still be going

    async def fail(session: AsyncSession, job: RedriveJob, error: str) -> None:
        if job.id not in found_running:
            await redrive_jobs.finish(session, job.id, status="failed", error=error)

    async def insert(session: AsyncSession) -> RedriveJob:
        await limits.lock(session, tenant_id)  # counted one start at a time
        active = await redrive_jobs.active(session, tenant_id, since=ACTIVE_FOR)
        mine = [job for job in active if job.customer_id == customer_id]
        same = next((job for job in mine if job.filter == wanted), None)
        if same is not None:
            found_running.add(same.id)
            return same
        _refuse_past_share(active, mine, customer_id)
        return await redrive_jobs.insert_job(
            session,
            tenant_id=tenant_id,
            region=settings.region,
            filter=wanted,
            customer_id=customer_id,
        )

    return await queue.start_tracked(
        sessionmaker,
        what="redrive job",
        insert=insert,
        enqueue=lambda job: queue.enqueue_bulk_redrive(arq, settings.region, job.id),
        fail=fail,
    )


def _refuse_past_share(
    active: list[RedriveJob], mine: list[RedriveJob], customer_id: str | None
) -> None:
    """TooManyRequests when the asker (the tenant, or one of its customers) already has its
    share of bulk redrives queued or running."""
    if customer_id is None:
        shares = [(mine, MAX_ACTIVE_PER_TENANT, "of this tenant")]
    else:
        customers = [job for job in active if job.customer_id is not None]
        shares = [
            (mine, MAX_ACTIVE_PER_CUSTOMER, "of this customer"),
            (customers, MAX_ACTIVE_ALL_CUSTOMERS, "of this tenant's customers together"),
        ]
    for running, share, whose in shares:
        if len(running) >= share:
            raise TooManyRequests(
                f"{len(running)} bulk redrives {whose} are queued or running, as many as may "
                f"be: wait for one to finish ({', '.join(job.id for job in running)})",
                headers={"Retry-After": "10"},
            )
