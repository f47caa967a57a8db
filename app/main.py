"""The FastAPI application: ``create_app(settings)`` builds it; the lifespan owns its resources."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app import __version__
from app.api import deliveries, endpoints, events, health, reconcile, tenants
from app.api.deps import Resources
from app.config import Settings, load_settings
from app.db import create_engine, create_sessionmaker
from app.errors import PayloadTooLarge, install_error_handlers, problem_response
from app.queue import create_queue_redis
from app.services.publishing import FastPublisher

# Room for the JSON envelope around the payload and for a client's pretty-printing; the payload
# itself is measured exactly once it is encoded.
_BODY_SLACK_BYTES = 64 * 1024


class BodyLimit:
    """Refuse oversized request bodies with 413 before they are buffered and parsed."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                # This runs outside the exception handlers, so it answers by itself.
                response = problem_response(
                    Request(scope),
                    status=PayloadTooLarge.status,
                    title=PayloadTooLarge.title,
                    slug=PayloadTooLarge.slug,
                    detail=f"request body exceeds {self.max_bytes} bytes",
                )
                await response(scope, receive, send)
                return
        seen = 0

        # Chunked bodies carry no length: count as they arrive. Raised here, the error surfaces
        # where the route reads the body, inside the exception handlers.

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise PayloadTooLarge(f"request body exceeds {self.max_bytes} bytes")
            return message

        await self.app(scope, limited_receive, send)


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
            settings=settings, sessionmaker=sessionmaker, redis=redis, publisher=publisher
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
    for module in (tenants, endpoints, deliveries, events, reconcile, health):
        app.include_router(module.router)
    app.add_middleware(BodyLimit, max_bytes=2 * settings.max_payload_bytes + _BODY_SLACK_BYTES)
    return app


def app_from_environment() -> FastAPI:
    """Factory for ``uvicorn --factory app.main:app_from_environment``."""
    return create_app(load_settings())
