"""Fixtures that build real things: PostgreSQL migrated from scratch, Redis, the app, tenants.

With ``HERALD_DATABASE_URL`` set, the suite creates (and afterwards drops) a scratch database on
that server instead of starting the embedded one; likewise ``HERALD_REDIS_URL`` for Redis.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from arq.connections import ArqRedis
from fastapi import FastAPI
from redis.asyncio import Redis
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core import queue
from app.core.config import Settings
from app.core.db import Base, create_engine, is_transaction_conflict
from app.core.migrate import upgrade_to_head
from app.main import create_app
from app.models import Delivery  # noqa: F401  (every table registered with Base)
from devstack.embedded import EmbeddedPostgres, postgres_bin_dir, redis_server_program
from devstack.tcp_servers import TcpPostgres, TcpRedis, free_port
from tests.fixtures.api import new_endpoint, new_tenant
from tests.fixtures.receiver import Receiver, running_receiver
from tests.fixtures.recovery import install_state_log
from tests.fixtures.stack import (
    OwnPostgres,
    Stack,
    client_for,
    make_settings,
    scratch_database,
)

# Fixtures more than one tier of tests uses, kept beside the helpers they run.
pytest_plugins = ["tests.fixtures.forward_proxy"]

# Every table Herald has, from its metadata: a table added later is emptied too.
TABLES = ", ".join(table.name for table in Base.metadata.sorted_tables)


# A test cluster is thrown away: durability settings only cost time here.
THROWAWAY_CLUSTER = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("stack")
    with ExitStack() as cleanup:
        external_db = os.environ.get("HERALD_DATABASE_URL")
        if external_db:
            name = f"herald_test_{os.getpid()}"
            database_url = asyncio.run(scratch_database(external_db, name, create=True))
            cleanup.callback(lambda: asyncio.run(scratch_database(external_db, name, create=False)))
        else:
            # Over TCP, as users reach theirs: `make run`'s unix sockets are tested by the
            # tests that start herald-dev, and by own_postgres.
            postgres = TcpPostgres(
                postgres_bin_dir(), workdir / "pg", free_port(), "pgserver", THROWAWAY_CLUSTER
            )
            cleanup.callback(postgres.stop)
            database_url = postgres.start()
        redis_url = os.environ.get("HERALD_REDIS_URL")
        if not redis_url:
            redis = TcpRedis(redis_server_program(), workdir / "redis", free_port())
            cleanup.callback(redis.stop)
            redis_url = redis.start()
        upgrade_to_head(database_url)
        asyncio.run(install_state_log(database_url))
        yield Stack(database_url=database_url, redis_url=redis_url, workdir=workdir)


@pytest.fixture(scope="session")
def settings(stack: Stack) -> Settings:
    return make_settings(stack)


@pytest.fixture(scope="session")
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(app) as http:
        yield http


@pytest.fixture(scope="session")
async def engine(stack: Stack) -> AsyncIterator[AsyncEngine]:
    database = create_engine(stack.database_url, pool_size=5)
    yield database
    await database.dispose()


@pytest.fixture
async def own_postgres(stack: Stack, tmp_path: Path) -> AsyncIterator[OwnPostgres]:
    """A fresh, migrated PostgreSQL for one test that stops and restarts it (the session's
    server stays up for everyone else)."""
    server = EmbeddedPostgres(tmp_path / "pg")
    database_url = await asyncio.to_thread(server.start)
    try:
        await asyncio.to_thread(upgrade_to_head, database_url)
        await install_state_log(database_url)
        engine = create_engine(database_url, pool_size=2)
        try:
            yield OwnPostgres(server, Stack(database_url, stack.redis_url, stack.workdir), engine)
        finally:
            await engine.dispose()
    finally:
        await asyncio.to_thread(server.stop)


@pytest.fixture
async def clean_slate(engine: AsyncEngine, stack: Stack) -> None:
    """Empty tables and an empty Redis (no stale work from others): every integration and
    system test starts so (their conftests use it for every test); unit tests start no
    server at all."""
    for tries_left in reversed(range(5)):
        try:
            async with engine.begin() as connection:
                await connection.execute(
                    text(f"TRUNCATE {TABLES}, test_state_log RESTART IDENTITY CASCADE")
                )
            break
        except DBAPIError as exc:
            # A worker kept for a whole module may be recording while this runs: its statement
            # locks deliveries, then attempts, and TRUNCATE takes them in its own order, so
            # PostgreSQL may end the deadlock by rolling this side back. Nothing was done.
            if not is_transaction_conflict(exc) or not tries_left:
                raise
    redis = Redis.from_url(stack.redis_url)
    try:
        await redis.flushdb()
    finally:
        await redis.aclose()


@pytest.fixture
async def redis(settings: Settings) -> AsyncIterator[ArqRedis]:
    """The session's Redis, connected as the service connects (ArqRedis, lazy pool)."""
    assert settings.redis_url is not None
    connection = queue.create_queue_redis(settings.redis_url, region=settings.region)
    yield connection
    await connection.aclose()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """A real HTTP receiver on 127.0.0.1 (the suite's apps and workers allowlist loopback)."""
    async with running_receiver() as running:
        yield running


@pytest.fixture
async def tenant(client: httpx.AsyncClient) -> dict[str, str]:
    return await new_tenant(client, "acme")


@pytest.fixture
async def endpoint(client: httpx.AsyncClient, tenant: dict[str, str]) -> dict[str, Any]:
    return await new_endpoint(client, tenant)
