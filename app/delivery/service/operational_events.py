"""Operational events: Herald's own events about a tenant's endpoints and deliveries, made from
the signals written where each thing happened (app/signals/) and accepted as any event is -- an
event, a delivery to each subscribed operational endpoint, their outbox wake-ups -- so that the
engine delivers them with the same signing, retries and flow control as the tenant's own.

Every worker runs this relay beside the outbox's. A page of signals is claimed (SKIP LOCKED),
accepted and deleted in one transaction: a crash before the commit leaves the page to the next
claim, and after it nothing is left to tell twice. Its wake-ups are published at once (the
outbox relay publishes whatever that misses).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.config import Settings
from app.core.db import DATABASE_TROUBLE, is_transient
from app.core.ids import new_id
from app.core.redis_clients import FlowRedis
from app.delivery.service import fanout
from app.delivery.service.intake import encode_payload, insert_intent
from app.models import OperationalSignal
from app.outbox.service.outbox import PendingPublication
from app.outbox.service.publishing import publish_and_mark
from app.signals.service import signals
from app.tenants.service import limits

log = structlog.get_logger("herald.operational")

PAGE_SIZE = 100


async def relay_once(
    sessionmaker: async_sessionmaker[AsyncSession], redis: FlowRedis, settings: Settings
) -> int:
    """Tell one page of signals; how many there were. A page that fails for a reason other
    than the database's passing trouble is told one signal at a time, and a signal that
    cannot be told at all is dropped with an error in the log, so that it never holds back
    the signals behind it."""
    try:
        told, publications = await _tell(sessionmaker, settings, PAGE_SIZE)
    except DATABASE_TROUBLE as exc:
        if is_transient(exc):
            raise
        told, publications = await _tell_one_by_one(sessionmaker, settings)
    except Exception:
        told, publications = await _tell_one_by_one(sessionmaker, settings)
    if publications:
        await publish_and_mark(
            sessionmaker, redis, settings.region, publications, fault=settings.fault
        )
    return told


async def _tell(
    sessionmaker: async_sessionmaker[AsyncSession], settings: Settings, limit: int
) -> tuple[int, list[PendingPublication]]:
    publications: list[PendingPublication] = []
    async with sessionmaker() as session, session.begin():
        page = await signals.claim_page(session, limit=limit)
        fanouts: dict[str, int] = {}
        for signal in page:
            publications += await _accept(session, settings, signal, fanouts)
        if page:
            await signals.delete_told(session, [signal.id for signal in page])
    return len(page), publications


async def _tell_one_by_one(
    sessionmaker: async_sessionmaker[AsyncSession], settings: Settings
) -> tuple[int, list[PendingPublication]]:
    told, publications = 0, list[PendingPublication]()
    for _ in range(PAGE_SIZE):
        try:
            one, published = await _tell(sessionmaker, settings, 1)
        except Exception as exc:
            if isinstance(exc, DATABASE_TROUBLE) and is_transient(exc):
                raise
            await _drop_first(sessionmaker, exc)
            continue
        if not one:
            break
        told, publications = told + one, publications + published
    return told, publications


async def _drop_first(sessionmaker: async_sessionmaker[AsyncSession], exc: Exception) -> None:
    async with sessionmaker() as session, session.begin():
        for signal in await signals.claim_page(session, limit=1):
            log.error(
                "operational.signal_dropped",
                tenant_id=signal.tenant_id,
                type=signal.type,
                error=type(exc).__name__,
            )
            await signals.delete_told(session, [signal.id])


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
    payload = encode_payload(signal.payload, settings.max_payload_bytes)
    endpoint_ids, filtered_out = await fanout.operational_targets(
        session,
        signal.tenant_id,
        signal.type,
        signal.payload,
        len(payload),
        fanouts[signal.tenant_id],
    )
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
    failing = False
    while not stop.is_set():
        delay = settings.relay_interval_seconds
        try:
            told = await relay_once(sessionmaker, redis, settings)
            if failing:
                log.info("operational.recovered")
                failing = False
            if told == PAGE_SIZE:
                delay = 0
        except Exception as exc:
            if not failing:
                log.warning("operational.failing", error=type(exc).__name__)
                failing = True
            delay = min(5.0, delay * 4)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)
