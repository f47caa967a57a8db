"""Benchmark receiver: a separate process that answers POSTs (optionally after a delay) and
records when each webhook-id first arrived. `GET /stats` returns the count and arrival times.

    python bench/receiver.py PORT [DELAY_SECONDS]
"""

from __future__ import annotations

import asyncio
import sys
import time

from aiohttp import web


def main() -> None:
    port, delay = int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    arrivals: dict[str, float] = {}
    received = 0

    async def hook(request: web.Request) -> web.Response:
        nonlocal received
        await request.read()
        received += 1
        arrivals.setdefault(request.headers.get("webhook-id", str(received)), time.time())
        if delay:
            await asyncio.sleep(delay)
        return web.Response(text="ok")

    async def stats(request: web.Request) -> web.Response:
        return web.json_response({"received": received, "arrivals": arrivals})

    async def reset(request: web.Request) -> web.Response:
        nonlocal received
        received = 0
        arrivals.clear()
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/hook", hook)
    app.router.add_get("/stats", stats)
    app.router.add_post("/reset", reset)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=2048)


if __name__ == "__main__":
    main()
