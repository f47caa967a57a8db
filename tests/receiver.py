"""A real HTTP receiver on 127.0.0.1 for delivery tests: scripted answers, recorded requests."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web

from tests.processes import free_port


@dataclass(frozen=True)
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"ok"
    delay: float = 0.0  # seconds before answering (a receiver that "never answers": large)
    trickle: float = 0.0  # seconds between body bytes (a slow trickle)
    hold: asyncio.Event | None = None  # answer only once the test sets this
    body_hold: asyncio.Event | None = None  # send status and headers, the body once this is set


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic()


class Receiver:
    def __init__(self) -> None:
        self.requests: list[Received] = []
        self._scripts: dict[str, deque[Reply]] = defaultdict(deque)
        self._in_flight = 0
        self.max_in_flight = 0
        self.port = 0
        self._arrived = asyncio.Condition()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def script(self, path: str, *replies: Reply) -> None:
        """Answer requests to ``path`` with ``replies`` in order, then 200 forever."""
        self._scripts[path].extend(replies)

    def unscript(self, path: str) -> None:
        """Forget what is left of ``path``'s script: plain 200s from now on."""
        self._scripts[path].clear()

    def on(self, path: str) -> list[Received]:
        return [r for r in self.requests if r.path == path]

    async def wait_for(self, path: str, count: int, timeout: float = 20.0) -> list[Received]:
        async with self._arrived:
            await asyncio.wait_for(
                self._arrived.wait_for(lambda: len(self.on(path)) >= count), timeout
            )
        return self.on(path)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        async with self._arrived:
            self.requests.append(
                Received(request.path, dict(request.headers), body, time.monotonic())
            )
            self._arrived.notify_all()
        script = self._scripts[request.path]
        reply = script.popleft() if script else Reply()
        self._in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            if reply.hold is not None:
                await reply.hold.wait()
            await asyncio.sleep(reply.delay)
            if reply.body_hold is not None:
                response = web.StreamResponse(status=reply.status, headers=reply.headers)
                await response.prepare(request)  # the status line and headers go out now
                await reply.body_hold.wait()
                await response.write(reply.body)
                return response
            if reply.trickle:
                response = web.StreamResponse(status=reply.status, headers=reply.headers)
                await response.prepare(request)
                for byte in reply.body:
                    await response.write(bytes([byte]))
                    await asyncio.sleep(reply.trickle)
                return response
            return web.Response(status=reply.status, headers=reply.headers, body=reply.body)
        finally:
            self._in_flight -= 1


@asynccontextmanager
async def running_receiver() -> AsyncIterator[Receiver]:
    receiver = Receiver()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", receiver.handle)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
    await runner.setup()
    receiver.port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", receiver.port)
    await site.start()
    try:
        yield receiver
    finally:
        await runner.cleanup()
