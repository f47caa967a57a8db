"""One reconcile run in a process of its own, reporting its time and its memory growth.

Settings come from the environment (HERALD_*), as for any Herald process.
"""

from __future__ import annotations

import asyncio
import json
import time

import psutil

from app.core.config import load_settings
from app.core.db import create_engine, create_sessionmaker
from app.core.redis_clients import RedisClients
from app.reconcile.repository import reconcile_runs
from app.reconcile.service.reconcile import run_reconcile


async def main() -> None:
    settings = load_settings()
    assert settings.database_url is not None and settings.redis_url is not None
    engine = create_engine(settings.async_database_url, pool_size=2)
    sessionmaker = create_sessionmaker(engine)
    clients = RedisClients.open(settings)
    process = psutil.Process()
    async with sessionmaker() as session, session.begin():
        run = await reconcile_runs.insert_run(session, region=settings.region, trigger="bench")
    rss_before = process.memory_info().rss
    started = time.perf_counter()
    await run_reconcile(settings, sessionmaker, clients.flow, run.id)
    seconds = time.perf_counter() - started
    rss_after = process.memory_info().rss
    async with sessionmaker() as session, session.begin():
        finished = await reconcile_runs.get(session, run.id)
    await clients.aclose()
    await engine.dispose()
    assert finished is not None
    print(
        json.dumps(
            {
                "seconds": seconds,
                "rss_growth_mb": (rss_after - rss_before) / 2**20,
                "status": finished.status,
                "counts": finished.counts,
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
