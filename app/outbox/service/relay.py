"""The outbox relay: publishes what the API's fast path did not, in bounded pages.

Every worker process runs one; SKIP LOCKED and short claims let any number run side by side.
"""

from __future__ import annotations

import asyncio
import functools

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.config import Settings
from app.core.redis_clients import FlowRedis
from app.core.relays import run_pages
from app.outbox.repository import outbox
from app.outbox.service.publishing import publish_and_mark

log = structlog.get_logger("herald.relay")

# Younger rows are the API fast path's to publish; the relay is the safety net behind it.
FAST_PATH_HEADSTART_SECONDS = 0.3


async def relay_once(
    sessionmaker: async_sessionmaker[AsyncSession], redis: FlowRedis, settings: Settings
) -> int:
    """Publish one page; returns how many rows it published."""
    async with sessionmaker() as session, session.begin():
        page = await outbox.claim_unpublished(
            session,
            region=settings.region,
            limit=settings.relay_page_size,
            min_age_seconds=FAST_PATH_HEADSTART_SECONDS,
            claim_seconds=settings.relay_claim_seconds,
        )
    if page:
        await publish_and_mark(sessionmaker, redis, settings.region, page, fault=settings.fault)
        log.info("relay.published", count=len(page))
    return len(page)


async def run_relay(
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: FlowRedis,
    settings: Settings,
    stop: asyncio.Event,
) -> None:
    await run_pages(
        functools.partial(relay_once, sessionmaker, redis, settings),
        page_size=settings.relay_page_size,
        interval=settings.relay_interval_seconds,
        stop=stop,
        log=log,
        name="relay",
    )
