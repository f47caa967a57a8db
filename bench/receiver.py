"""Benchmark receiver: a separate process that answers POSTs (optionally after a delay, or with
a fixed status such as `429` and a `Retry-After`) and records what it saw.

    python bench/receiver.py PORT [DELAY_SECONDS] [--status 429 --retry-after 3600]

`GET /stats`: requests received and answered, Σ time spent answering them (`busy_seconds`), the first start
and last end (Unix time), and the most answered at once. `GET /arrivals`: when each webhook-id
first arrived (kept apart from /stats: a run polls /stats, and serialising 50,000 arrivals on
every poll would load the receiver it measures). `POST /reset` clears both.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from aiohttp import web


class Receiver:
    def __init__(self, delay: float, status: int, retry_after: str | None) -> None:
        self.delay = delay
        self.status = status
        self.headers = {"Retry-After": retry_after} if retry_after else {}
        self.arrivals: dict[str, float] = {}
        self.reset_counts()

    def reset_counts(self) -> None:
        self.received = 0
        self.answered = 0
        self.busy_seconds = 0.0
        self.first_start: float | None = None
        self.last_end: float | None = None
        self.concurrent = 0
        self.max_concurrent = 0

    async def hook(self, request: web.Request) -> web.Response:
        started = time.time()
        self.concurrent += 1
        self.max_concurrent = max(self.max_concurrent, self.concurrent)
        try:
            await request.read()
            self.received += 1
            self.arrivals.setdefault(request.headers.get("webhook-id", str(self.received)), started)
            if self.delay:
                await asyncio.sleep(self.delay)
            return web.Response(status=self.status, text="ok", headers=self.headers)
        finally:
            self.concurrent -= 1
            self.answered += 1
            ended = time.time()
            self.busy_seconds += ended - started
            self.first_start = started if self.first_start is None else self.first_start
            self.last_end = ended

    async def stats(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = {
            "received": self.received,
            "answered": self.answered,
            "busy_seconds": self.busy_seconds,
            "first_start": self.first_start,
            "last_end": self.last_end,
            "max_concurrent": self.max_concurrent,
        }
        return web.json_response(body)

    async def arrivals_(self, request: web.Request) -> web.Response:
        return web.json_response(self.arrivals)

    async def reset(self, request: web.Request) -> web.Response:
        self.reset_counts()
        self.arrivals.clear()
        return web.json_response({})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("delay", type=float, nargs="?", default=0.0, help="seconds per answer")
    parser.add_argument("--status", type=int, default=200, help="the status of every answer")
    parser.add_argument("--retry-after", help="a Retry-After header on every answer")
    args = parser.parse_args()
    receiver = Receiver(args.delay, args.status, args.retry_after)
    app = web.Application()
    app.router.add_post("/hook", receiver.hook)
    app.router.add_get("/stats", receiver.stats)
    app.router.add_get("/arrivals", receiver.arrivals_)
    app.router.add_post("/reset", receiver.reset)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None, access_log=None, backlog=2048)


if __name__ == "__main__":
    main()
