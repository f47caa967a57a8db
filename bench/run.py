"""`make bench`: Herald's figures (bench/figures.py), each beside a baseline measured in the same
run.

Starts PostgreSQL and Redis in a scratch directory -- by default Debian's, as servers reached
over TCP, the shape users run; `--servers embedded` for `make run`'s -- then `herald api`
(uvicorn, uvloop, httptools) and `herald worker` processes at their default settings, in the
shape asked for, the receiver processes
(bench/receiver.py), and drives load from this process with aiohttp. Prints the table and
writes the results as JSON.

    .venv/bin/python bench/run.py [--quick] [--workers N]
        [--concurrency C] [--api-workers N] [--servers system|embedded]
        [--only FIGURE,...] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import aiohttp
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script: `bench` and `app` come from this checkout

from bench.figures import FIGURES, FULL, IN_FLIGHT, QUICK, ROUNDS, RUNS, Volumes  # noqa: E402
from bench.load import RECEIVERS, Client  # noqa: E402
from bench.report import table  # noqa: E402
from bench.stack import Shape, Stack, wait_http  # noqa: E402


async def run(shape: Shape, volumes: Volumes, figures: list[str], servers: str) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="hbench-"))
    stack = Stack(workdir, shape, servers)
    results: dict[str, Any] = {
        "machine": {
            "cores": os.cpu_count(),
            "memory_gb": round(psutil.virtual_memory().total / 2**30),
        },
        "shape": {**asdict(shape), "description": f"{shape.describe()}; {stack.describe()}"},
        "volumes": asdict(volumes),
    }
    try:
        await asyncio.to_thread(stack.start)
        for receiver in RECEIVERS.values():
            receiver.spawn(stack)
        await stack.start_api()
        for receiver in RECEIVERS.values():
            await wait_http(f"{receiver.url}/stats")
        # Idle connections are dropped before uvicorn's 5 s keep-alive would close them under us.
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=2)
        async with aiohttp.ClientSession(connector=connector) as http:
            client = Client(stack, http)
            await client.setup()
            for figure in figures:
                await RUNS[figure](client, volumes, results)
    finally:
        stack.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller volumes, for a smoke run")
    parser.add_argument("--workers", type=int, default=2, help="herald worker processes (2)")
    parser.add_argument(
        "--concurrency",
        type=int,
        help=f"HERALD_WORKER_CONCURRENCY of each (default: {IN_FLIGHT} / workers)",
    )
    parser.add_argument("--api-workers", type=int, default=2, help="herald api --workers (2)")
    parser.add_argument(
        "--servers",
        choices=("system", "embedded"),
        default="system",
        help="system: Debian's PostgreSQL and Redis over TCP, as users run them (the default); "
        "embedded: make run's servers over unix sockets",
    )
    parser.add_argument("--only", help=f"comma-separated figures, of: {', '.join(FIGURES)}")
    parser.add_argument(
        "--out",
        type=Path,
        default=REPO / "bench" / "results.json",
        help="where the results go as JSON (bench/results.json)",
    )
    args = parser.parse_args()
    args.figures = args.only.split(",") if args.only else list(FIGURES)
    unknown = set(args.figures) - set(FIGURES)
    if unknown:
        parser.error(f"unknown figures: {', '.join(sorted(unknown))}")
    return args


def main() -> None:
    # SIGTERM (a timeout, a CI cancel) must still stop every server and process started here.
    signal.signal(signal.SIGTERM, _interrupt)
    args = _arguments()
    shape = Shape(
        api_workers=args.api_workers,
        workers=args.workers,
        concurrency=args.concurrency or max(1, IN_FLIGHT // args.workers),
    )
    started = time.perf_counter()
    volumes = QUICK if args.quick else FULL
    results = asyncio.run(run(shape, volumes, args.figures, args.servers))
    results["wall_seconds"] = time.perf_counter() - started
    args.out.write_text(json.dumps(results, indent=2))
    print(table(results))
    print(
        f"\n(accept, batch, latency, scale out and the Redis Cluster figures: the median of"
        f" {ROUNDS} rounds, their shapes alternating; the rest: one run)"
    )
    print(f"\n(machine: {results['machine']}, wall time {results['wall_seconds']:.0f} s)")


if __name__ == "__main__":
    main()
