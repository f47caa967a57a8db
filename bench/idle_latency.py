"""Intent-to-first-attempt latency on an idle system.

Starts `herald dev` (embedded PostgreSQL + Redis, one API and one worker process) in a scratch
data dir, a receiver on 127.0.0.1, then POSTs intents one at a time, spaced out, and measures
from just before the POST to the receiver seeing the request.

    .venv/bin/python bench/idle_latency.py [--count 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from aiohttp import web

REPO = Path(__file__).resolve().parents[1]


async def main(count: int, spacing: float) -> None:
    arrived: dict[str, float] = {}
    done = asyncio.Event()

    async def hook(request: web.Request) -> web.Response:
        arrived[request.headers["webhook-id"]] = time.perf_counter()
        if len(arrived) >= count:
            done.set()
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 9931).start()

    data_dir = Path(tempfile.mkdtemp(prefix="hb-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERALD_")}
    env.update(HERALD_DATA_DIR=str(data_dir), HERALD_PORT="8931")
    dev = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.cli", "dev",
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert dev.stdout is not None
        while b"Press Ctrl-C" not in await dev.stdout.readline():
            pass
        key = json.loads((data_dir / "dev-credentials.json").read_text())["tenant_api_key"]
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url="http://127.0.0.1:8931", timeout=10) as http:
            endpoint = await http.post(
                "/v1/endpoints", json={"url": "http://127.0.0.1:9931/hook"}, headers=headers
            )
            endpoint_id = endpoint.json()["id"]
            sent: dict[str, float] = {}
            for n in range(count):
                started = time.perf_counter()
                response = await http.post(
                    "/v1/deliveries",
                    json={"endpoint_id": endpoint_id, "event_type": "bench", "payload": {"n": n}},
                    headers=headers,
                )
                sent[response.json()["id"]] = started
                await asyncio.sleep(spacing)
            await asyncio.wait_for(done.wait(), 30)
        latencies = sorted((arrived[d] - sent[d]) * 1000 for d in sent)
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        print(
            f"intent-to-first-attempt over {count} intents: "
            f"p50 {statistics.median(latencies):.1f} ms, p99 {p99:.1f} ms, "
            f"max {latencies[-1]:.1f} ms"
        )
    finally:
        dev.send_signal(signal.SIGTERM)
        await asyncio.wait_for(dev.wait(), 60)
        await runner.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--spacing", type=float, default=0.05)
    args = parser.parse_args()
    asyncio.run(main(args.count, args.spacing))
