"""Helpers shared by tests: settings for the test stack, clients, tenants, row counts."""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import httpx
from fastapi import FastAPI
from redis.asyncio import Redis
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app import queue
from app.config import Settings, to_asyncpg_url
from app.db import create_sessionmaker
from app.engine.service.attempt import Attempts
from app.engine.service.pump import Pump
from app.engine.service.sender import build_http_session
from app.flow.service.gate import Gate
from app.flow.service.wakeups import Arm, Wakeups
from app.reconcile.service.reconcile import run_reconcile
from devstack.embedded import EmbeddedPostgres

T = TypeVar("T")
ADMIN_KEY = "test-admin-key-" + secrets.token_hex(8)
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
LOOPBACK_ALLOWLIST = "127.0.0.0/8,::1/128"


@dataclass(frozen=True)
class Stack:
    database_url: str
    redis_url: str
    workdir: Path


@dataclass(frozen=True)
class OwnPostgres:
    """A PostgreSQL server of one test's own, to stop and start: ``stack`` pairs it with the
    session's Redis, ``engine`` reaches it from the test."""

    server: EmbeddedPostgres
    stack: Stack
    engine: AsyncEngine


def plain_dsn(url: str) -> str:
    """The URL as asyncpg itself (not SQLAlchemy) wants it."""
    return to_asyncpg_url(url).replace("postgresql+asyncpg://", "postgresql://", 1)


async def scratch_database(server_url: str, name: str, *, create: bool) -> str:
    """Create (or drop) the database ``name`` on the server of ``server_url``; returns its URL."""
    head, _, query = to_asyncpg_url(server_url).partition("?")
    base = head.rsplit("/", 1)[0]
    connection = await asyncpg.connect(plain_dsn(server_url))
    try:
        await connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if create:
            await connection.execute(f'CREATE DATABASE "{name}"')
    finally:
        await connection.close()
    return f"{base}/{name}" + (f"?{query}" if query else "")


def make_settings(stack: Stack, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": stack.database_url,
        "redis_url": stack.redis_url,
        "admin_api_key": ADMIN_KEY,
        "destination_allowlist": LOOPBACK_ALLOWLIST,
        "db_pool_size": 30,
        "metrics_cache_seconds": 0,
    }
    values.update(overrides)
    return Settings(**values)


def client_for(application: FastAPI) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=application, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://herald.test")


async def count_rows(engine: AsyncEngine, table: str, where: str = "TRUE", **params: Any) -> int:
    async with engine.connect() as connection:
        result = await connection.execute(
            text(f"SELECT count(*) FROM {table} WHERE {where}"),  # noqa: S608  (test-only SQL)
            params,
        )
        return int(result.scalar_one())


async def redis_now_us(redis: Redis) -> int:
    """Redis's clock (TIME), in microseconds: the clock Herald's scripts decide on."""
    seconds, microseconds = await redis.time()
    return int(seconds) * 1_000_000 + int(microseconds)


async def new_tenant(client: httpx.AsyncClient, name: str) -> dict[str, str]:
    response = await client.post("/v1/tenants", json={"name": name}, headers=ADMIN)
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['api_key']}"}


async def new_endpoint(
    client: httpx.AsyncClient, headers: dict[str, str], **fields: Any
) -> dict[str, Any]:
    body = {"url": "http://127.0.0.1:9/hook", **fields}
    response = await client.post("/v1/endpoints", json=body, headers=headers)
    assert response.status_code == 201, response.text
    endpoint: dict[str, Any] = response.json()
    return endpoint


async def fast_path_settled(engine: AsyncEngine, timeout: float = 10.0) -> None:
    """Wait until the API's fast path has published every outbox row (no worker consumes them
    in API tests, so the deliveries then sit in `enqueued`)."""
    unpublished = functools.partial(count_rows, engine, "outbox", "published_at IS NULL")
    await eventually(unpublished, lambda count: count == 0, timeout=timeout, every=0.02)


async def accept(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint_id: str,
    *,
    event_type: str = "a.b",
    payload: dict[str, Any] | None = None,
    **extra: Any,
) -> str:
    """One intent accepted (202); its delivery id."""
    response = await client.post(
        "/v1/deliveries",
        json={
            "endpoint_id": endpoint_id,
            "event_type": event_type,
            "payload": {} if payload is None else payload,
            **extra,
        },
        headers=tenant,
    )
    assert response.status_code == 202, response.text
    delivery_id: str = response.json()["id"]
    return delivery_id


async def post_deliveries(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    endpoint_id: str,
    count: int,
    event_type: str = "test.event",
) -> list[str]:
    """Accept ``count`` intents one request at a time; returns their delivery ids."""
    ids = []
    for n in range(count):
        response = await client.post(
            "/v1/deliveries",
            json={"endpoint_id": endpoint_id, "event_type": event_type, "payload": {"n": n}},
            headers=headers,
        )
        assert response.status_code == 202, response.text
        ids.append(response.json()["id"])
    return ids


async def eventually(
    probe: Callable[[], Awaitable[T]],
    done: Callable[[T], bool],
    *,
    timeout: float = 60.0,
    every: float = 0.05,
) -> T:
    """Wait, triggering nothing, until ``done(probe())``; that value. The one polling loop of
    the suite: on time-out it fails showing the last value seen."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not done(value := await probe()):
        assert asyncio.get_running_loop().time() < deadline, f"not reached in time: {value!r}"
        await asyncio.sleep(every)
    return value


async def until(
    predicate: Callable[[], Awaitable[bool]], timeout: float = 60.0, every: float = 0.1
) -> None:
    """Wait, triggering nothing, until ``predicate()`` is true."""
    await eventually(predicate, bool, timeout=timeout, every=every)


async def delivery_row(engine: AsyncEngine, delivery_id: str) -> dict[str, Any]:
    """The delivery's whole row, as the database has it now."""
    async with engine.connect() as connection:
        result = await connection.execute(
            text("SELECT * FROM deliveries WHERE id = :d"), {"d": delivery_id}
        )
        return dict(result.mappings().one())


async def wait_state(
    engine: AsyncEngine, delivery_id: str, state: str, timeout: float = 20.0
) -> dict[str, Any]:
    """Wait, triggering nothing (no reconcile run), until the delivery is in ``state``."""
    return await eventually(
        lambda: delivery_row(engine, delivery_id),
        lambda row: row["state"] == state,
        timeout=timeout,
    )


def _values_of(key: str, schema: Any) -> list[Any]:
    """Every value of ``key`` anywhere in a JSON schema (through anyOf, items, ...)."""
    if isinstance(schema, dict):
        own = [schema[key]] if key in schema else []
        return own + [found for value in schema.values() for found in _values_of(key, value)]
    if isinstance(schema, list):
        return [found for value in schema for found in _values_of(key, value)]
    return []


def request_fields(application: FastAPI) -> dict[str, dict[str, Any]]:
    """Every field a request can carry, with its JSON schema: body fields as ``Model.field``
    (batch items too: they are validated one by one, so the OpenAPI document shows them as
    plain objects) and query parameters as ``GET /v1/deliveries?event_type``."""
    from app.delivery.schemas import BatchItem

    openapi = application.openapi()
    components = openapi["components"]["schemas"]
    models = {"BatchItem": BatchItem.model_json_schema()}
    fields: dict[str, dict[str, Any]] = {}
    for path, operations in openapi["paths"].items():
        for method, operation in operations.items():
            body = operation.get("requestBody", {}).get("content", {})
            for ref in _values_of("$ref", body):
                name = ref.rsplit("/", 1)[1]
                models[name] = components[name]
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "query":
                    fields[f"{method.upper()} {path}?{parameter['name']}"] = parameter["schema"]
    for name, schema in models.items():
        for field, field_schema in schema["properties"].items():
            fields[f"{name}.{field}"] = field_schema
    return fields


def patterned_inputs(application: FastAPI) -> dict[str, list[str]]:
    """The request fields held to a text rule, with the rule's regular expressions."""
    return {
        name: patterns
        for name, schema in request_fields(application).items()
        if (patterns := _values_of("pattern", schema))
    }


def datetime_inputs(application: FastAPI) -> set[str]:
    """The request fields that take a date and time."""
    return {
        name
        for name, schema in request_fields(application).items()
        if "date-time" in _values_of("format", schema)
    }


@asynccontextmanager
async def postgres_refuses(engine: AsyncEngine, table: str, operation: str) -> AsyncIterator[str]:
    """While inside, PostgreSQL itself refuses every ``operation`` (UPDATE, INSERT, ...) on
    ``table`` with an error: a real database failure for a worker to meet. Yields the message."""
    message = "refused for a test: " + secrets.token_hex(4)
    trigger = f"test_refuse_{operation.lower()}_{table}"
    async with engine.begin() as connection:
        await connection.execute(
            text(
                f"CREATE FUNCTION {trigger}() RETURNS trigger LANGUAGE plpgsql AS"
                f" $$ BEGIN RAISE EXCEPTION '{message}'; END $$"
            )
        )
        # Per statement, so it fires even when the statement matches no row.
        await connection.execute(
            text(
                f"CREATE TRIGGER {trigger} BEFORE {operation} ON {table}"
                f" FOR EACH STATEMENT EXECUTE FUNCTION {trigger}()"
            )
        )
    try:
        yield message
    finally:
        async with engine.begin() as connection:
            await connection.execute(text(f"DROP TRIGGER {trigger} ON {table}"))
            await connection.execute(text(f"DROP FUNCTION {trigger}()"))


def ip_addresses_in(written: str) -> set[str]:
    """Every IPv4 or IPv6 address written anywhere in ``written``."""
    found = set()
    for token in re.findall(r"[0-9A-Fa-f:.]+", written):
        for candidate in (token, token.rstrip(".:")):  # a sentence may end right after one
            try:
                found.add(str(ipaddress.ip_address(candidate)))
            except ValueError:
                continue
    return found


@asynccontextmanager
async def row_locked(engine: AsyncEngine, delivery_id: str) -> AsyncIterator[None]:
    """Hold the delivery's row lock, as another transaction (a publish mark, another claim)
    would: a batch claim skips the row while it is held."""
    async with engine.begin() as connection:
        await connection.execute(
            text("SELECT 1 FROM deliveries WHERE id = :d FOR UPDATE"), {"d": delivery_id}
        )
        yield


@asynccontextmanager
async def stalled_statements(engine: AsyncEngine, into_state: str) -> AsyncIterator[None]:
    """While inside, PostgreSQL holds every statement that moves a delivery into
    ``into_state`` (it waits for a lock this keeps): a database that does not answer, for one
    step of an attempt. A statement still held when the block ends dies with its connection,
    as it would with a database that never answered: whether the worker's own cancel reached
    the server first is a race that must not decide what the test sees."""
    lock = secrets.randbits(31)
    trigger = f"test_stall_{into_state}"
    async with engine.begin() as connection:
        await connection.execute(
            text(
                f"CREATE FUNCTION {trigger}() RETURNS trigger LANGUAGE plpgsql AS"
                f" $$ BEGIN PERFORM pg_advisory_xact_lock({lock}); RETURN NEW; END $$"
            )
        )
        await connection.execute(
            text(
                f"CREATE TRIGGER {trigger} BEFORE UPDATE ON deliveries FOR EACH ROW"
                f" WHEN (NEW.state = '{into_state}') EXECUTE FUNCTION {trigger}()"
            )
        )
    async with engine.connect() as holder:
        await holder.execute(text(f"SELECT pg_advisory_lock({lock})"))
        try:
            yield
        finally:
            # A one-key advisory lock shows as classid 0, objid = the key.
            await holder.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'"
                    " AND classid = 0 AND objid = :lock AND NOT granted"
                ),
                {"lock": lock},
            )
            await holder.execute(text(f"SELECT pg_advisory_unlock({lock})"))
            await holder.commit()
    async with engine.begin() as connection:
        await connection.execute(text(f"DROP TRIGGER {trigger} ON deliveries"))
        await connection.execute(text(f"DROP FUNCTION {trigger}()"))


@asynccontextmanager
async def pump(
    settings: Settings, engine: AsyncEngine, *, policy_cache_seconds: float = 1.0, **overrides: Any
) -> AsyncIterator[tuple[Pump, Gate]]:
    """A worker's delivery pump in this process, on ``engine``'s pool, with ``overrides`` to its
    settings, and its gate. Once started, it serves every due destination of the region as a
    worker's pump does; leaving the block drains it (nothing stays leased)."""
    configured = settings.model_copy(update=overrides)
    http = build_http_session(configured.destination_allowlist, 10)
    assert configured.redis_url is not None
    redis = queue.create_queue_redis(configured.redis_url, region=configured.region)
    try:
        sessionmaker = create_sessionmaker(engine)
        gate = Gate(configured, sessionmaker, redis, cache_seconds=policy_cache_seconds)
        running = Pump(configured, sessionmaker, redis, gate, Attempts(configured, http, gate))
        try:
            yield running, gate
        finally:
            await running.drain(configured.shutdown_grace)
    finally:
        await http.close()
        await redis.aclose()


async def arm(settings: Settings, tenant_id: str, endpoint_id: str, in_seconds: float = 0.0) -> int:
    """Arm a destination's wake-up, as a publisher or a reconcile run does; how many entries it
    created or moved earlier."""
    assert settings.redis_url is not None
    redis = queue.create_queue_redis(settings.redis_url, region=settings.region)
    try:
        wakeups = Wakeups(redis, settings.region)
        return await wakeups.arm([Arm(tenant_id, endpoint_id, in_seconds)])
    finally:
        await redis.aclose()


async def armed_destinations(settings: Settings) -> dict[str, float]:
    """Every destination's wake-up in Redis: endpoint id -> seconds until it is due, on Redis's
    clock (0 or less: due now)."""
    assert settings.redis_url is not None
    redis = Redis.from_url(settings.redis_url)
    try:
        now = await redis_now_us(redis) / 1e6
        armed = {}
        async for key in redis.scan_iter(f"herald:wake:{settings.region}:t:*"):
            for endpoint_id, at_ms in await redis.zrange(key, 0, -1, withscores=True):
                armed[endpoint_id.decode()] = at_ms / 1000 - now
        return armed
    finally:
        await redis.aclose()


async def lose_wakeups(settings: Settings) -> None:
    """Redis loses every destination's wake-up (and nothing else)."""
    assert settings.redis_url is not None
    redis = Redis.from_url(settings.redis_url)
    try:
        keys = [key async for key in redis.scan_iter(f"herald:wake:{settings.region}:*")]
        assert keys, "nothing was armed"
        await redis.delete(*keys)
    finally:
        await redis.aclose()


def sample(body: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text format."""
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = (
        rf"^{re.escape(name)}\{{{re.escape(wanted)}\}} (\S+)$" if labels else rf"^{name} (\S+)$"
    )
    match = re.search(pattern, body, re.MULTILINE)
    assert match, f"{name}{{{wanted}}} not in:\n{body}"
    return float(match.group(1))


async def reconcile_now(
    client: httpx.AsyncClient, settings: Settings, engine: AsyncEngine, **overrides: Any
) -> dict[str, Any]:
    """Record a run through the API, then run the job in-process (no worker in these tests)."""
    started = await client.post("/v1/reconcile", json={"trigger": "test"}, headers=ADMIN)
    assert started.status_code == 202, started.text
    run_id = started.json()["run_id"]
    assert settings.redis_url is not None
    redis = queue.create_queue_redis(settings.redis_url, region=settings.region)
    try:
        await run_reconcile(
            settings.model_copy(update=overrides), create_sessionmaker(engine), redis, run_id
        )
    finally:
        await redis.aclose()
    run: dict[str, Any] = (await client.get(f"/v1/reconcile/runs/{run_id}", headers=ADMIN)).json()
    return run
