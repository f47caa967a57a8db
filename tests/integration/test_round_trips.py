"""What one accepted intent costs on the wire, counted by a proxy in front of each server:
round trips to PostgreSQL and commands to Redis, keyed and unkeyed, with the API's publish.

The suite's servers are reached over TCP, as users reach theirs; the first test says so."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.main import create_app
from tests.fixtures.api import fast_path_settled, new_endpoint, new_tenant
from tests.fixtures.stack import Stack, client_for, make_settings
from tests.fixtures.wire import PostgresReader, RedisReader, Totals, counting_proxy

ACCEPTS = 5


async def test_the_suite_reaches_its_servers_over_tcp(stack: Stack, engine: AsyncEngine) -> None:
    async with engine.connect() as connection:
        server = (await connection.execute(text("SELECT host(inet_server_addr())"))).scalar()
    assert server == "127.0.0.1"  # NULL over a unix socket
    assert stack.redis_url.startswith("redis://127.0.0.1:")


@pytest.fixture
async def counted(stack: Stack) -> AsyncIterator[tuple[httpx.AsyncClient, Totals, Totals]]:
    """The app with its PostgreSQL and its Redis each behind a counting proxy."""
    async with (
        counting_proxy(stack.database_url, PostgresReader) as (database_url, postgres),
        counting_proxy(stack.redis_url, RedisReader) as (redis_url, redis),
    ):
        settings = make_settings(Stack(database_url, redis_url, stack.workdir))
        application = create_app(settings)
        async with (
            application.router.lifespan_context(application),
            client_for(application) as http,
        ):
            yield http, postgres, redis


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
async def test_an_accept_is_one_round_trip_and_its_publish_two_more(
    counted: tuple[httpx.AsyncClient, Totals, Totals], engine: AsyncEngine, keyed: bool
) -> None:
    http, postgres, redis = counted
    tenant = await new_tenant(http, "wire")
    endpoint = await new_endpoint(http, tenant)
    body: dict[str, Any] = {"endpoint_id": endpoint["id"], "event_type": "a.b", "payload": {}}

    async def accept() -> None:
        key = {"Idempotency-Key": uuid.uuid4().hex} if keyed else {}
        response = await http.post("/v1/deliveries", json=body, headers={**tenant, **key})
        assert response.status_code == 202, response.text
        await fast_path_settled(engine)  # the publish has run: one accept's whole cost

    await accept()  # the tenant's key is now cached, the statements prepared
    postgres.clear()
    redis.clear()
    for _ in range(ACCEPTS):
        await accept()

    # The accept's one statement, then the publish: the destination armed in Redis (one
    # script call), the outbox row and the delivery marked in one statement.
    assert postgres.round_trips == ACCEPTS * 2
    assert redis.commands == Counter({"EVALSHA": ACCEPTS})
