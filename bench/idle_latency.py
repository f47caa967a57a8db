"""Intent-to-first-attempt latency on an idle system, and beside a paused destination's backlog.

Starts `herald-dev` (embedded PostgreSQL + Redis, one API and one worker process) in a scratch
data dir, a receiver on 127.0.0.1, then POSTs intents one at a time, spaced out, and measures
from just before the POST to the receiver seeing the request.

With `--beside-paused N`, it then pauses a second destination the way a receiver would (a 429
with `Retry-After: 3600`), accepts N deliveries for it, waits until the relay has queued them
all, and measures the healthy destination again: the same run's "alone" figure is the baseline.

    .venv/bin/python bench/idle_latency.py [--count 100] [--beside-paused 10000]
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
PORT, RECEIVER_PORT = 8931, 9931


class Receiver:
    """Records when each delivery first arrived; answers /paused with a one-hour 429."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}

    async def hook(self, request: web.Request) -> web.Response:
        self.arrived.setdefault(request.headers["webhook-id"], time.perf_counter())
        if request.path == "/paused":
            return web.Response(status=429, headers={"Retry-After": "3600"})
        return web.Response(text="ok")


def summary(latencies_ms: list[float]) -> dict[str, float]:
    ordered = sorted(latencies_ms)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"p50_ms": statistics.median(ordered), "p99_ms": p99, "max_ms": ordered[-1]}


async def latencies(
    http: httpx.AsyncClient, receiver: Receiver, endpoint_id: str, count: int, spacing: float
) -> list[float]:
    sent: dict[str, float] = {}
    for n in range(count):
        started = time.perf_counter()
        response = await http.post(
            "/v1/deliveries",
            json={"endpoint_id": endpoint_id, "event_type": "bench", "payload": {"n": n}},
        )
        sent[response.json()["id"]] = started
        await asyncio.sleep(spacing)
    deadline = time.perf_counter() + 30
    while not all(d in receiver.arrived for d in sent):
        if time.perf_counter() > deadline:
            raise RuntimeError("not every delivery arrived within 30 s")
        await asyncio.sleep(0.05)
    return [(receiver.arrived[d] - at) * 1000 for d, at in sent.items()]


async def park(http: httpx.AsyncClient, admin_key: str, endpoint_id: str, count: int) -> None:
    """Pause the endpoint by its receiver's 429, accept ``count`` deliveries for it and wait
    until the relay has queued every one."""
    await http.post(
        "/v1/deliveries", json={"endpoint_id": endpoint_id, "event_type": "bench", "payload": {}}
    )
    while (await http.get(f"/v1/endpoints/{endpoint_id}")).json()["paused_until"] is None:
        await asyncio.sleep(0.05)
    items = [{"endpoint_id": endpoint_id, "event_type": "bench", "payload": {}}] * 1000
    for _ in range(count // 1000):
        response = await http.post("/v1/deliveries/batch", json={"items": items})
        response.raise_for_status()
    admin = {"Authorization": f"Bearer {admin_key}"}
    lag = 'herald_outbox_relay_lag_seconds{region="local"} 0.0'
    while lag not in (await http.get("/metrics", headers=admin)).text:
        await asyncio.sleep(0.2)
    await asyncio.sleep(1)  # let the worker see every queued job once


async def main(count: int, spacing: float, beside_paused: int) -> dict[str, dict[str, float]]:
    receiver = Receiver()
    app = web.Application()
    app.router.add_post("/{path}", receiver.hook)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", RECEIVER_PORT).start()

    data_dir = Path(tempfile.mkdtemp(prefix="hb-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERALD_")}
    env.update(HERALD_DATA_DIR=str(data_dir), HERALD_PORT=str(PORT))
    dev = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "devstack.cli",
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    results: dict[str, dict[str, float]] = {}
    try:
        assert dev.stdout is not None
        while b"Press Ctrl-C" not in await dev.stdout.readline():
            pass
        credentials = json.loads((data_dir / "dev-credentials.json").read_text())
        headers = {"Authorization": f"Bearer {credentials['tenant_api_key']}"}
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{PORT}", timeout=30, headers=headers
        ) as http:
            ids = {}
            for path in ("healthy", "paused"):
                url = f"http://127.0.0.1:{RECEIVER_PORT}/{path}"
                ids[path] = (await http.post("/v1/endpoints", json={"url": url})).json()["id"]
            results["alone"] = summary(
                await latencies(http, receiver, ids["healthy"], count, spacing)
            )
            if beside_paused:
                await park(http, credentials["admin_api_key"], ids["paused"], beside_paused)
                beside = await latencies(http, receiver, ids["healthy"], count, spacing)
                results[f"beside_{beside_paused}_paused"] = summary(beside)
    finally:
        dev.send_signal(signal.SIGTERM)
        await asyncio.wait_for(dev.wait(), 60)
        await runner.cleanup()
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--spacing", type=float, default=0.05)
    parser.add_argument(
        "--beside-paused", type=int, default=0, help="also measure beside N paused deliveries"
    )
    args = parser.parse_args()
    figures = asyncio.run(main(args.count, args.spacing, args.beside_paused))
    for name, figure in figures.items():
        print(
            f"intent-to-first-attempt, {name.replace('_', ' ')}, over {args.count} intents: "
            f"p50 {figure['p50_ms']:.1f} ms, p99 {figure['p99_ms']:.1f} ms, "
            f"max {figure['max_ms']:.1f} ms"
        )
    if len(figures) == 2:
        alone, beside = figures.values()
        print(f"beside the paused backlog / alone (p50): x{beside['p50_ms'] / alone['p50_ms']:.2f}")
