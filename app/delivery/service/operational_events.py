"""Operational events: Herald's own events about a tenant's endpoints and deliveries, made from
the signals written where each thing happened (app/signals/) and accepted as any event is -- an
event, a delivery to each subscribed operational endpoint, their outbox wake-ups -- so that the
engine delivers them with the same signing, retries and flow control as the tenant's own.

Every worker runs this relay beside the outbox's. A page of signals is claimed (SKIP LOCKED),
accepted and deleted in one transaction: a crash before the commit leaves the page to the next
claim, and after it nothing is left to tell twice. Pages claimed by several workers commit in
any order, so events are not ordered by when they happened: each says when (occurred_at). Its
wake-ups are published at once (the outbox relay publishes whatever that misses).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.config import Settings
from app.core.db import DATABASE_TROUBLE, is_transient
from app.core.ids import new_id
from app.core.redis_clients import FlowRedis
from app.core.relays import run_pages
from app.delivery.service import fanout
from app.delivery.service.intake import encode_payload, insert_intent
from app.models import OperationalSignal
from app.outbox.service.outbox import PendingPublication
from app.outbox.service.publishing import publish_and_mark
from app.signals.service import signals
from app.tenants.service import limits

log = structlog.get_logger("herald.operational")

PAGE_SIZE = 100
# The largest operational payload: an endpoint's 100 event types of 255 characters and its URL
# come to about 30 KiB.
OWN_PAYLOAD_BYTES = 256 * 1024


async def relay_once(
    sessionmaker: async_sessionmaker[AsyncSession], redis: FlowRedis, settings: Settings
) -> int:
    """Tell one page of signals; how many there were. Each signal is accepted under a savepoint
    of the page's transaction: one that can never be told (a fault of Herald's own) is
    dropped, with an error in the log, and never holds back the signals behind it -- and it
    is exactly that one, held by this transaction's lock, that is dropped. The database's
    passing trouble fails the whole page, which a later claim tells again."""
    publications: list[PendingPublication] = []
    async with sessionmaker() as session, session.begin():
        page = await signals.claim_page(session, limit=PAGE_SIZE)
        fanouts: dict[str, int] = {}
        for signal in page:
            try:
                async with session.begin_nested():
                    publications += await _accept(session, settings, signal, fanouts)
            except Exception as exc:
                if isinstance(exc, DATABASE_TROUBLE) and is_transient(exc):
                    raise
                log.error(
                    "operational.signal_dropped",
                    signal_id=signal.id,
                    tenant_id=signal.tenant_id,
                    type=signal.type,
                    error=type(exc).__name__,
                )
        if page:
            await signals.delete_told(session, [signal.id for signal in page])
    if publications:
        await publish_and_mark(
            sessionmaker, redis, settings.region, publications, fault=settings.fault
        )
    return len(page)


async def _accept(
    session: AsyncSession,
    settings: Settings,
    signal: OperationalSignal,
    fanouts: dict[str, int],
) -> Sequence[PendingPublication]:
    """The signal's event and its deliveries, unless no operational endpoint of the tenant
    wants it (an event that goes nowhere is not kept)."""
    if signal.tenant_id not in fanouts:
        tenant = await limits.tenant_of(session, signal.tenant_id)
        fanouts[signal.tenant_id] = limits.Limits.defaults(settings).of(tenant).max_fanout
    # Herald's own payload, bounded by what it tells of: the tenant's limit is for its events.
    payload = encode_payload(signal.payload, OWN_PAYLOAD_BYTES)
    endpoint_ids, filtered_out = await fanout.operational_targets(
        session,
        signal.tenant_id,
        signal.type,
        signal.payload,
        len(payload),
        fanouts[signal.tenant_id],
    )
    # An operational endpoint is not told of itself: its own disabling cannot reach it, and
    # no answer of its to news about itself can make more.
    endpoint_ids = [e for e in endpoint_ids if e != signal.payload.get("endpoint_id")]
    if not endpoint_ids:
        return []
    _, publications = await insert_intent(
        session,
        settings,
        tenant_id=signal.tenant_id,
        event_id=new_id("evt"),
        customer_id=None,
        event_type=signal.type,
        payload=payload,
        endpoint_ids=endpoint_ids,
        filtered_out=filtered_out,
        deliver_after=None,
        ordering_key=None,
        traceparent=None,
    )
    return publications


async def run_relay(
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: FlowRedis,
    settings: Settings,
    stop: asyncio.Event,
) -> None:
    """Tell signals until ``stop``: at once while pages come full, else every relay interval."""
    await run_pages(
        functools.partial(relay_once, sessionmaker, redis, settings),
        page_size=PAGE_SIZE,
        interval=settings.relay_interval_seconds,
        stop=stop,
        log=log,
        name="operational",
    )
