"""``Resources``: everything a request may use, built once in the API's lifespan (never at
import) from one ``Settings``, shared by every request, and closed when the process stops; and
the dependencies a route takes them, or the publisher among them, with."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated

from arq.connections import ArqRedis
from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.catalogue.service.payload_schemas import PayloadSchemas
from app.core.config import Settings
from app.core.db import create_engine, create_sessionmaker
from app.core.redis_clients import FlowRedis, RedisClients
from app.core.replicas import Reads
from app.core.scope import Scope
from app.core.sealing import KeyRing
from app.endpoints.service import handshakes
from app.engine.service.endpoint_tester import EndpointTester
from app.engine.service.polls import Polls
from app.flow.service.accept_rates import AcceptRates
from app.operations.service.fleet import FleetGauges
from app.operations.service.partitions import PartitionKeeper
from app.outbox.service.publishing import FastPublisher
from app.tenants.service.api_keys import PrincipalCache


@dataclass
class Resources:
    """Everything a request may use, built once in the lifespan and shared."""

    settings: Settings
    keys: KeyRing  # HERALD_SECRET_KEYS: what every stored secret is sealed under
    sessionmaker: async_sessionmaker[AsyncSession]
    reads: Reads  # status, listings and attempts: from a replica that keeps up, else the primary
    redis: FlowRedis  # wake-ups, flow ceilings, rates: one Redis or a Redis Cluster
    queue: ArqRedis  # arq's control jobs: reconcile runs, bulk redrives
    publisher: FastPublisher
    fleet: FleetGauges
    principals: PrincipalCache
    payload_schemas: PayloadSchemas
    tester: EndpointTester  # POST /v1/endpoints/{id}/test: a test event, sent now
    accept_rates: AcceptRates  # each tenant's accept rate, counted across API processes
    partitions: PartitionKeeper  # awaited by every accept: the day's partitions exist
    polls: Polls  # polling endpoints: reads, signed as sent, and acknowledgements

    async def receiver_consent(
        self, scope: Scope, target: handshakes.HandshakeTarget | None
    ) -> handshakes.Consent | None:
        """The receiver's consent an endpoint's save needs (None: it needs none), for the API
        and the console alike: the save's rules held first, the tenant's minute counted, and
        asked outside any transaction -- no database connection waits on a receiver."""
        if target is None:
            return None
        await handshakes.vet(target, self.settings.destination_allowlist)
        customer = scope.customer_id or ""
        await self.tester.admit(
            self.redis, scope.tenant_id, "webhook handshakes", customer=customer
        )
        return await self.tester.handshake(scope.tenant_id, target, customer=customer)


@asynccontextmanager
async def open_resources(settings: Settings) -> AsyncIterator[Resources]:
    """The API process's resources, open while the context lasts: the key ring first (every
    stored secret is sealed under it, so a bad HERALD_SECRET_KEYS stops the start here), then
    the database, Redis and the publisher's task."""
    keys = settings.key_ring()
    engine = create_engine(settings.async_database_url, pool_size=settings.db_pool_size)
    sessionmaker = create_sessionmaker(engine)
    reads = Reads.open(
        sessionmaker,
        settings.async_database_url,
        settings.async_replica_urls,
        max_lag=settings.replica_max_lag_seconds,
        probe_every=settings.replica_probe_seconds,
        pool_size=settings.db_pool_size,
    )
    reads.start()
    clients = RedisClients.open(settings)
    redis = clients.flow
    publisher = FastPublisher(sessionmaker, redis, settings.region)
    publisher.start()
    resources = Resources(
        settings=settings,
        keys=keys,
        sessionmaker=sessionmaker,
        reads=reads,
        redis=redis,
        queue=clients.queue,
        publisher=publisher,
        fleet=FleetGauges(reads, redis, settings.region, settings.metrics_cache_seconds),
        principals=PrincipalCache(settings.api_key_cache_seconds),
        payload_schemas=PayloadSchemas(sessionmaker, settings.event_type_cache_seconds),
        tester=EndpointTester(settings, keys),
        accept_rates=AcceptRates(settings, sessionmaker, redis),
        partitions=PartitionKeeper(engine, settings.partitions_ahead_days, settings.retention_days),
        polls=Polls(settings, sessionmaker, keys),
    )
    try:
        yield resources
    finally:
        await resources.tester.close()
        await publisher.stop()
        await clients.aclose()
        await reads.close()
        await engine.dispose()


# ``async def`` although they await nothing: FastAPI runs a plain ``def`` dependency in a worker
# thread, and those hops were a measurable share of each request.
async def get_resources(request: Request) -> Resources:
    resources: Resources = request.app.state.resources
    return resources


ResourcesDep = Annotated[Resources, Depends(get_resources)]


async def get_publisher(resources: ResourcesDep) -> FastPublisher:
    return resources.publisher


PublisherDep = Annotated[FastPublisher, Depends(get_publisher)]
