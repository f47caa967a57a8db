"""The accept's same-run baseline: a bare ASGI app -- no framework, no validation, no auth --
that answers `POST /v1/deliveries` by running Herald's own accept statement
(``intents.insert_for_endpoint``) through asyncpg, served by uvicorn exactly as `herald api`
is (uvloop, httptools, the same number of processes). What Herald spends beyond it is the
price of its framework, its checks and its care.

    uvicorn bench.bare_accept:app --workers 2 --loop uvloop --http httptools --port P

Reads HERALD_DATABASE_URL, BARE_TENANT_ID and BARE_REGION from the environment.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import asyncpg

from app.core.ids import new_id, sibling_id
from app.delivery.repository import intents

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_pool: asyncpg.Pool | None = None


async def _start() -> None:
    global _pool
    url = os.environ["HERALD_DATABASE_URL"].replace("postgresql+asyncpg://", "postgresql://")
    # The server settings Herald's engine gives its connections (app/core/db.py).
    _pool = await asyncpg.create_pool(
        url,
        min_size=20,
        max_size=20,
        server_settings={"plan_cache_mode": "force_generic_plan", "jit": "off"},
        reset=_no_reset,  # asyncpg's default reset is a round trip on every release
    )


async def _no_reset(connection: asyncpg.Connection) -> None:
    return None


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while (message := await receive())["type"] != "lifespan.shutdown":
            if message["type"] == "lifespan.startup":
                await _start()
                await send({"type": "lifespan.startup.complete"})
        if _pool is not None:
            await _pool.close()
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["method"] != "POST" or scope["path"] != "/v1/deliveries":
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    intent = json.loads(body)
    event_id = new_id("evt")
    assert _pool is not None
    async with _pool.acquire() as connection:
        inserted = await intents.insert_for_endpoint(
            connection,
            tenant_id=os.environ["BARE_TENANT_ID"],
            endpoint_id=intent["endpoint_id"],
            event_id=event_id,
            event_type=intent["event_type"],
            payload=json.dumps(intent["payload"], separators=(",", ":")).encode(),
            delivery_id=sibling_id("dlv", event_id),
            region=os.environ["BARE_REGION"],
            deliver_after=None,
            traceparent=None,
        )
    assert inserted.delivery is not None
    answer = json.dumps({"id": inserted.delivery["id"], "state": "pending"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 202,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": answer})
