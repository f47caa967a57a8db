"""The FastAPI application: ``create_app(settings)`` builds it; the lifespan owns its resources."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app import __version__
from app.api import deliveries, endpoints, events, health, metrics, reconcile, tenants
from app.api.deps import Resources
from app.config import Settings, load_settings
from app.db import create_engine, create_sessionmaker
from app.errors import PayloadTooLarge, install_error_handlers, problem_response
from app.logs import configure_logging
from app.queue import create_queue_redis
from app.services.api_keys import PrincipalCache
from app.services.fleet import FleetGauges
from app.services.publishing import FastPublisher

# Room for the JSON envelope around the payload and for a client's pretty-printing; the payload
# itself is measured exactly once it is encoded.
_BODY_SLACK_BYTES = 64 * 1024


class BodyLimit:
    """Refuse oversized request bodies with 413 before they are parsed.

    A declared Content-Length is checked up front (the server enforces it). A chunked body has
    no length, so it is read here, counting, and handed on only if it fits: the app would
    buffer it whole anyway, and this way an oversized one is answered 413 rather than
    surfacing as a body-parsing error.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, batch_max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.batch_max_bytes = batch_max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.batch_max_bytes if scope["path"].endswith("/batch") else self.max_bytes
        headers = dict(scope["headers"])
        length = headers.get(b"content-length", b"")
        if length.isdigit() and int(length) > limit:
            await self._refuse(scope, receive, send, limit)
            return
        if b"chunked" not in headers.get(b"transfer-encoding", b"").lower():
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._refuse(scope, receive, send, limit)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        response = problem_response(
            Request(scope),
            status=PayloadTooLarge.status,
            title=PayloadTooLarge.title,
            slug=PayloadTooLarge.slug,
            detail=f"request body exceeds {limit} bytes",
        )
        await response(scope, receive, send)


def create_app(settings: Settings) -> FastAPI:
    if settings.database_url is None or settings.redis_url is None:
        raise ValueError("create_app needs HERALD_DATABASE_URL and HERALD_REDIS_URL")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = create_engine(settings.async_database_url, pool_size=settings.db_pool_size)
        sessionmaker = create_sessionmaker(engine)
        redis = create_queue_redis(str(settings.redis_url), region=settings.region)
        publisher = FastPublisher(sessionmaker, redis, settings.region)
        publisher.start()
        app.state.resources = Resources(
            settings=settings,
            sessionmaker=sessionmaker,
            redis=redis,
            publisher=publisher,
            fleet=FleetGauges(sessionmaker, settings.region, settings.metrics_cache_seconds),
            principals=PrincipalCache(settings.api_key_cache_seconds),
        )
        try:
            yield
        finally:
            await publisher.stop()
            await redis.aclose()
            await engine.dispose()

    app = FastAPI(
        title="Herald",
        version=__version__,
        description="Webhook delivery: intents committed with a transactional outbox, "
        "delivered by workers with leases, signatures, retries and a reconciler.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    for module in (tenants, endpoints, deliveries, events, reconcile, health, metrics):
        app.include_router(module.router)
    app.add_middleware(
        BodyLimit,
        max_bytes=2 * settings.max_payload_bytes + _BODY_SLACK_BYTES,
        batch_max_bytes=settings.max_batch_bytes,
    )
    return app


def app_from_environment() -> FastAPI:
    """Factory for ``uvicorn --factory app.main:app_from_environment`` (one per process)."""
    settings = load_settings()
    configure_logging(settings.log_format, settings.log_level)
    return create_app(settings)
